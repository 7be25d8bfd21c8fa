package ingest

// Digits parses a whole number written the way query parameters such as
// page and limit must be: one or more plain decimal digits, with no sign,
// '+', space, decimal point or exponent. ok is false for anything else and
// for a value above math.MaxInt64. Handlers call it on a parameter that
// Call.HasQuery reports present, so "?limit=" and "?limit=%2B5" are refused
// rather than read as the default.
func Digits(s string) (n int64, ok bool) {
	if s == "" {
		return 0, false
	}
	const maxInt64 = 1<<63 - 1
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		if n > (maxInt64-int64(d))/10 {
			return 0, false
		}
		n = n*10 + int64(d)
	}
	return n, true
}
