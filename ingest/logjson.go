package ingest

import (
	"strconv"
	"time"

	"sendstream/schemas"
)

// appendRequestLog encodes rl as encoding/json would (same field order,
// omitempty and escaping), without reflection: it runs for every logged
// call. The one difference: in a body written as JSON (schemas.Body),
// encoding/json escapes <, >, & and U+2028/U+2029; this copies them.
// reqJSON and respJSON say rl.RequestBody and rl.ResponseBody are compact
// JSON (schemas.AppendCompactBody).
func appendRequestLog(b []byte, rl *schemas.RequestLog, reqJSON, respJSON bool) []byte {
	b = append(b, `{"at":`...)
	b = append(b, '"')
	b = rl.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","method":`...)
	b = schemas.AppendJSONString(b, rl.Method)
	b = append(b, `,"path":`...)
	b = schemas.AppendJSONString(b, rl.Path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(rl.Status), 10)
	b = append(b, `,"durationUs":`...)
	b = strconv.AppendInt(b, rl.DurationUS, 10)
	b = append(b, `,"keyId":`...)
	b = schemas.AppendJSONString(b, rl.KeyID)
	b = append(b, `,"keyKind":`...)
	b = schemas.AppendJSONString(b, rl.KeyKind)
	if rl.AppID != "" {
		b = append(b, `,"appId":`...)
		b = schemas.AppendJSONString(b, rl.AppID)
	}
	if rl.MemberID != "" {
		b = append(b, `,"memberId":`...)
		b = schemas.AppendJSONString(b, rl.MemberID)
	}
	b = appendLogBody(b, `,"requestBody":`, rl.RequestBody, reqJSON)
	b = appendLogBody(b, `,"responseBody":`, rl.ResponseBody, respJSON)
	if rl.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	b = append(b, `,"produced":{`...)
	p := &rl.Produced
	n := len(b)
	b = appendList(b, "messageIds", p.MessageIDs)
	b = appendList(b, "eventIds", p.EventIDs)
	b = appendList(b, "journeyRunIds", p.JourneyRunIDs)
	b = appendList(b, "contactIds", p.ContactIDs)
	if p.Recipient != "" {
		b = appendKey(b, "recipient")
		b = schemas.AppendJSONString(b, p.Recipient)
	}
	if p.ExternalID != "" {
		b = appendKey(b, "externalId")
		b = schemas.AppendJSONString(b, p.ExternalID)
	}
	if len(b) > n {
		b = append(b[:n], b[n+1:]...) // drop the first field's leading comma
	}
	b = append(b, '}')
	if rl.IP != "" {
		b = append(b, `,"ip":`...)
		b = schemas.AppendJSONString(b, rl.IP)
	}
	if rl.UserAgent != "" {
		b = append(b, `,"userAgent":`...)
		b = schemas.AppendJSONString(b, rl.UserAgent)
	}
	return append(b, '}')
}

// appendLogBody appends member (`,"name":`) and body unless body is empty;
// compact says body is compact JSON (schemas.AppendCompactBody).
func appendLogBody(b []byte, member string, body schemas.Body, compact bool) []byte {
	switch {
	case body == "":
		return b
	case compact:
		return schemas.AppendCompactBody(append(b, member...), string(body))
	default:
		return schemas.AppendBody(append(b, member...), string(body))
	}
}

func appendKey(b []byte, k string) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

func appendList(b []byte, k string, vs []string) []byte {
	if len(vs) == 0 {
		return b
	}
	b = appendKey(b, k)
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = schemas.AppendJSONString(b, v)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"
