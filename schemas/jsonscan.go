package schemas

// SkipJSONString returns the index after the JSON string starting at
// b[i] == '"', or, with ok false, the index where the input ended inside
// it. Escapes are stepped over, not checked.
func SkipJSONString(b []byte, i int) (end int, ok bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			i++
		}
	}
	return i, false
}

// SkipJSONValue returns the index after the JSON value starting at b[i]
// (a string, an object or array by bracket depth, or a scalar up to the
// next delimiter), or, with ok false, the index where scanning failed. It
// finds spans without validating them: callers that need valid JSON check
// the span.
func SkipJSONValue(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return SkipJSONString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := SkipJSONString(b, i)
				if !ok {
					return end, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return i, false
	default: // number, true, false, null
		start := i
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' &&
			b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		return i, i > start
	}
}
