package schemas

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The envelope is encoded and decoded for every message on every topic, so
// the producer and the runner use these hand-written functions instead of
// encoding/json's reflection. Both are exact: AppendEnvelope produces the
// bytes json.Marshal produces and DecodeEnvelope the value json.Unmarshal
// produces (round-trip and fuzz tests in codec_test.go hold them to that).
// Each handles the canonical shape itself and hands anything unusual (a
// payload needing compaction or escaping, escaped or unknown keys, nulls,
// invalid input) to encoding/json, so the wire format is encoding/json's.

// AppendEnvelope appends the JSON encoding of env to dst and returns the
// extended buffer: byte for byte what json.Marshal(env) returns, with the
// same errors (an invalid payload, a time outside years 0-9999). On error
// dst is returned unextended. Safe for concurrent use.
func AppendEnvelope(dst []byte, env *Envelope) ([]byte, error) {
	orig := len(dst)
	b := append(dst, `{"id":`...)
	b = AppendJSONString(b, env.ID)
	b = append(b, `,"workspace":`...)
	b = AppendJSONString(b, env.Workspace)
	b = append(b, `,"type":`...)
	b = AppendJSONString(b, env.Type)
	b = append(b, `,"key":`...)
	b = AppendJSONString(b, env.Key)
	b = append(b, `,"occurredAt":"`...)
	var err error
	// AppendText is Time.MarshalJSON without the quotes: RFC 3339 with
	// nanoseconds, failing for years outside 0-9999. Its output never
	// needs escaping.
	if b, err = env.OccurredAt.AppendText(b); err != nil {
		return slowAppendEnvelope(dst[:orig], env)
	}
	b = append(b, `","attempt":`...)
	b = strconv.AppendInt(b, int64(env.Attempt), 10)
	if env.CausationID != "" {
		b = append(b, `,"causationId":`...)
		b = AppendJSONString(b, env.CausationID)
	}
	if env.Traceparent != "" {
		b = append(b, `,"traceparent":`...)
		b = AppendJSONString(b, env.Traceparent)
	}
	b = append(b, `,"payload":`...)
	switch {
	case env.Payload == nil:
		b = append(b, "null"...)
	case env.PayloadCompact && len(env.Payload) > 0:
		b = append(b, env.Payload...)
	default:
		if b, err = appendRawJSON(b, env.Payload); err != nil {
			return dst[:orig], err
		}
	}
	return append(b, '}'), nil
}

func slowAppendEnvelope(dst []byte, env *Envelope) ([]byte, error) {
	v, err := json.Marshal(env)
	if err != nil {
		return dst, err
	}
	return append(dst, v...), nil
}

var payloadKey = []byte(`,"payload":`)

// DecodeEnvelope decodes data into env with the result and errors of
// json.Unmarshal(data, env): fields absent from data keep env's values,
// unknown fields are ignored. Unlike json.Unmarshal, env.Payload shares
// data's memory when the fast path decodes it: data must not be modified
// while env is in use. Safe for concurrent use on distinct envs. It is for
// envelopes read back from the broker: the check of the payload takes long
// strings it found valid before from memory (storedStrings). It sets
// env.PayloadCompact when it checked the payload and found it as
// AppendEnvelope writes one, so a handler that republishes it unchanged
// costs no second check.
func DecodeEnvelope(data []byte, env *Envelope) error {
	return decodeEnvelope(data, env, true)
}

// DecodeEnvelopeUnchecked is DecodeEnvelope for a consumer whose payload
// parser accepts nothing but exactly one valid JSON value: when the payload
// is the last member, as AppendEnvelope and json.Marshal write it, and
// every member that is always written came before it, env.Payload is the
// bytes between `"payload":` and the final '}' without the check that they
// are valid JSON. The parser then does that check. A payload followed by
// more members shows up as bytes after the value, which such a parser
// rejects.
func DecodeEnvelopeUnchecked(data []byte, env *Envelope) error {
	return decodeEnvelope(data, env, false)
}

func decodeEnvelope(data []byte, env *Envelope, check bool) error {
	tmp := *env
	tmp.PayloadCompact = false
	if fastDecodeEnvelope(data, &tmp, check) {
		*env = tmp
		return nil
	}
	env.PayloadCompact = false
	return json.Unmarshal(data, env)
}

// fastDecodeEnvelope decodes the shapes AppendEnvelope and encoding/json
// write: one object, no insignificant whitespace outside the payload, keys
// spelled exactly as the struct tags, string values without escapes. It
// returns false, leaving env partly written, for anything else. check false
// takes a final payload unchecked (DecodeEnvelopeUnchecked).
func fastDecodeEnvelope(data []byte, env *Envelope, check bool) bool {
	n := len(data)
	if n < 2 || data[0] != '{' {
		return false
	}
	i := 1
	if data[i] == '}' {
		return n == 2
	}
	// The string fields come before the payload (AppendEnvelope's order):
	// one copy of that head backs all of them. A plain string holds no
	// quote, so the first `,"payload":` is the key.
	seen := 0 // bit per member always written: id, workspace, type, key, occurredAt, attempt
	head := ""
	if h := bytes.Index(data, payloadKey); h > 0 {
		head = string(data[:h])
	} else if n <= 512 {
		head = string(data)
	}
	for {
		// Key: a plain string.
		if i >= n || data[i] != '"' {
			return false
		}
		ks := i + 1
		ke := ks
		for ke < n && data[ke] != '"' && data[ke] != '\\' && data[ke] >= 0x20 {
			ke++
		}
		if ke+1 >= n || data[ke] != '"' || data[ke+1] != ':' {
			return false
		}
		key := data[ks:ke]
		i = ke + 2
		if i >= n {
			return false
		}
		switch string(key) {
		case "id", "workspace", "type", "key", "causationId", "traceparent":
			end, ok := plainSpan(data, i)
			if !ok {
				return false
			}
			var s string
			if end <= len(head) {
				s = head[i+1 : end-1] // no allocation of its own
			} else {
				s = string(data[i+1 : end-1])
			}
			switch string(key) {
			case "id":
				env.ID = s
				seen |= 1
			case "workspace":
				env.Workspace = s
				seen |= 2
			case "type":
				env.Type = s
				seen |= 4
			case "key":
				seen |= 8
				if s == env.Workspace {
					s = env.Workspace // share the workspace's string
				}
				env.Key = s
			case "causationId":
				env.CausationID = s
			case "traceparent":
				env.Traceparent = s
			}
			i = end
		case "occurredAt":
			if data[i] != '"' {
				return false
			}
			e := i + 1
			for e < n && data[e] != '"' && data[e] != '\\' && data[e] >= 0x20 {
				e++
			}
			if e >= n || data[e] != '"' {
				return false
			}
			if err := env.OccurredAt.UnmarshalJSON(data[i : e+1]); err != nil {
				return false
			}
			seen |= 16
			i = e + 1
		case "attempt":
			e := i
			if e < n && data[e] == '-' {
				e++
			}
			ds := e
			for e < n && data[e] >= '0' && data[e] <= '9' {
				e++
			}
			// A plain integer of at most 18 digits without a leading zero.
			if e == ds || e-ds > 18 || (data[ds] == '0' && e-ds > 1) {
				return false
			}
			v, err := strconv.ParseInt(string(data[i:e]), 10, 64)
			if err != nil || int64(int(v)) != v {
				return false
			}
			env.Attempt = int(v)
			seen |= 32
			i = e
		case "payload":
			if !check && seen == 63 && n-1 > i && data[n-1] == '}' && !isSpace(data[i]) && !isSpace(data[n-2]) {
				env.Payload = json.RawMessage(data[i : n-1 : n-1])
				env.PayloadCompact = false // not checked
				return true
			}
			v := validator{stored: true}
			end, ok := v.value(data, i)
			if !ok {
				return false
			}
			env.Payload = json.RawMessage(data[i:end:end])
			// Checked and exactly what AppendEnvelope would write: a
			// handler republishing it is not checked again.
			env.PayloadCompact = !v.space && !v.escape
			i = end
		default:
			return false
		}
		if i >= n {
			return false
		}
		switch data[i] {
		case ',':
			i++
		case '}':
			return i+1 == n
		default:
			return false
		}
	}
}

// plainString reads a JSON string without escapes or control characters
// starting at data[i] (the opening quote) and returns its contents and the
// index after the closing quote. Invalid UTF-8 sends the caller to the slow
// path (encoding/json replaces it with U+FFFD).
func plainString(data []byte, i int) (string, int, bool) {
	end, ok := plainSpan(data, i)
	if !ok {
		return "", 0, false
	}
	return string(data[i+1 : end-1]), end, true
}

// plainSpan is plainString without the copy: it returns the index after
// the closing quote of the plain string at data[i].
func plainSpan(data []byte, i int) (int, bool) {
	if data[i] != '"' {
		return 0, false
	}
	s := i + 1
	e := s
	ascii := true
	for e < len(data) {
		c := data[e]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		e++
	}
	if e >= len(data) || data[e] != '"' {
		return 0, false
	}
	if !ascii && !utf8.Valid(data[s:e]) {
		return 0, false
	}
	return e + 1, true
}
