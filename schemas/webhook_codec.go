package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/buger/jsonparser"
)

// Every webhook delivery is decoded by the delivery stage and the delivery
// log, and every attempt is encoded by the delivery stage and decoded by
// the log, so these replace encoding/json's reflection on that path. Like
// codec.go they are exact: the canonical shape (the exact keys, values of
// the expected types, strings without escapes) is handled here, and
// anything else (escaped or unknown keys, nulls, other types) goes to
// encoding/json, whose result and errors they then are. The decoders take
// a payload that is valid JSON (the runner's checked DecodeEnvelope): they
// skip the delivery's body without checking it again.

// errWebhookSlow stops a fast decode: encoding/json decodes the payload.
var errWebhookSlow = errors.New("not the canonical shape")

// DecodeWebhookDelivery decodes a TypeWebhookDelivery payload as
// json.Unmarshal does; payload must be valid JSON. Body is a sub-slice of
// payload (not copied).
func DecodeWebhookDelivery(payload []byte) (WebhookDelivery, error) {
	var d WebhookDelivery
	err := jsonparser.ObjectEach(payload, func(k, v []byte, t jsonparser.ValueType, _ int) error {
		switch string(k) {
		case "messageId":
			return fastString(&d.MessageID, v, t)
		case "event":
			return fastString(&d.Event, v, t)
		case "targetKind":
			return fastString(&d.TargetKind, v, t)
		case "targetId":
			return fastString(&d.TargetID, v, t)
		case "url":
			return fastString(&d.URL, v, t)
		case "attempt":
			return fastInt(&d.Attempt, v, t)
		case "throttled":
			return fastInt(&d.Throttled, v, t)
		case "firstAt":
			return fastTime(&d.FirstAt, v, t)
		case "body":
			if t != jsonparser.Object {
				return errWebhookSlow
			}
			d.Body = json.RawMessage(v)
			return nil
		case "replay":
			return fastBool(&d.Replay, v, t)
		}
		return errWebhookSlow
	})
	if err != nil || !wholeObject(payload) {
		d = WebhookDelivery{}
		return d, json.Unmarshal(payload, &d)
	}
	return d, nil
}

// DecodeWebhookAttempt decodes a TypeWebhookAttempt payload as
// json.Unmarshal does; payload must be valid JSON.
func DecodeWebhookAttempt(payload []byte) (WebhookAttempt, error) {
	var a WebhookAttempt
	err := jsonparser.ObjectEach(payload, func(k, v []byte, t jsonparser.ValueType, _ int) error {
		switch string(k) {
		case "messageId":
			return fastString(&a.MessageID, v, t)
		case "event":
			return fastString(&a.Event, v, t)
		case "targetKind":
			return fastString(&a.TargetKind, v, t)
		case "targetId":
			return fastString(&a.TargetID, v, t)
		case "url":
			return fastString(&a.URL, v, t)
		case "attempt":
			return fastInt(&a.Attempt, v, t)
		case "throttled":
			return fastInt(&a.Throttled, v, t)
		case "outcome":
			return fastString(&a.Outcome, v, t)
		case "statusCode":
			return fastInt(&a.StatusCode, v, t)
		case "durationMs":
			if t != jsonparser.Number {
				return errWebhookSlow
			}
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return errWebhookSlow
			}
			a.DurationMs = f
			return nil
		case "error":
			return fastString(&a.Error, v, t)
		case "nextAttemptAt":
			var n time.Time
			if err := fastTime(&n, v, t); err != nil {
				return err
			}
			a.NextAttemptAt = &n
			return nil
		case "at":
			return fastTime(&a.At, v, t)
		case "replay":
			return fastBool(&a.Replay, v, t)
		}
		return errWebhookSlow
	})
	if err != nil || !wholeObject(payload) {
		a = WebhookAttempt{}
		return a, json.Unmarshal(payload, &a)
	}
	return a, nil
}

// wholeObject reports that payload is one object and nothing else around
// it but whitespace (ObjectEach stops at its end).
func wholeObject(payload []byte) bool {
	p := bytes.TrimSpace(payload)
	return len(p) >= 2 && p[0] == '{' && p[len(p)-1] == '}'
}

// fastString sets dst from a string without escapes.
func fastString(dst *string, v []byte, t jsonparser.ValueType) error {
	if t != jsonparser.String || bytes.IndexByte(v, '\\') >= 0 {
		return errWebhookSlow
	}
	*dst = string(v)
	return nil
}

// fastInt sets dst from an integer literal.
func fastInt(dst *int, v []byte, t jsonparser.ValueType) error {
	if t != jsonparser.Number {
		return errWebhookSlow
	}
	n, err := strconv.ParseInt(string(v), 10, 0)
	if err != nil {
		return errWebhookSlow
	}
	*dst = int(n)
	return nil
}

// fastBool sets dst from true or false.
func fastBool(dst *bool, v []byte, t jsonparser.ValueType) error {
	if t != jsonparser.Boolean {
		return errWebhookSlow
	}
	*dst = v[0] == 't'
	return nil
}

// fastTime sets dst from an RFC 3339 string, as time.Time's UnmarshalJSON.
func fastTime(dst *time.Time, v []byte, t jsonparser.ValueType) error {
	if t != jsonparser.String || bytes.IndexByte(v, '\\') >= 0 {
		return errWebhookSlow
	}
	if err := dst.UnmarshalText(v); err != nil {
		return errWebhookSlow
	}
	return nil
}

// AppendWebhookAttempt appends the JSON encoding of a to b: byte for byte
// what json.Marshal(a) returns, with the same errors (a duration that is
// not finite, a time outside years 0-9999). On error b is returned
// unextended.
func AppendWebhookAttempt(b []byte, a *WebhookAttempt) ([]byte, error) {
	dst := b
	slow := func() ([]byte, error) {
		p, err := json.Marshal(a)
		if err != nil {
			return dst, err
		}
		return append(dst, p...), nil
	}
	b = append(b, `{"messageId":`...)
	b = AppendJSONString(b, a.MessageID)
	b = append(b, `,"event":`...)
	b = AppendJSONString(b, a.Event)
	b = append(b, `,"targetKind":`...)
	b = AppendJSONString(b, a.TargetKind)
	b = append(b, `,"targetId":`...)
	b = AppendJSONString(b, a.TargetID)
	b = append(b, `,"url":`...)
	b = AppendJSONString(b, a.URL)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	if a.Throttled != 0 {
		b = append(b, `,"throttled":`...)
		b = strconv.AppendInt(b, int64(a.Throttled), 10)
	}
	b = append(b, `,"outcome":`...)
	b = AppendJSONString(b, a.Outcome)
	if a.StatusCode != 0 {
		b = append(b, `,"statusCode":`...)
		b = strconv.AppendInt(b, int64(a.StatusCode), 10)
	}
	b = append(b, `,"durationMs":`...)
	var ok bool
	if b, ok = appendJSONFloat(b, a.DurationMs); !ok {
		return slow()
	}
	if a.Error != "" {
		b = append(b, `,"error":`...)
		b = AppendJSONString(b, a.Error)
	}
	var err error
	if a.NextAttemptAt != nil {
		b = append(b, `,"nextAttemptAt":"`...)
		if b, err = a.NextAttemptAt.AppendText(b); err != nil {
			return slow()
		}
		b = append(b, '"')
	}
	b = append(b, `,"at":"`...)
	if b, err = a.At.AppendText(b); err != nil {
		return slow()
	}
	b = append(b, '"')
	if a.Replay {
		b = append(b, `,"replay":true`...)
	}
	return append(b, '}'), nil
}

// appendJSONFloat appends f as encoding/json encodes a float64; false for
// NaN and infinities (which it refuses).
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// AppendWebhookDelivery appends the JSON encoding of d to b: byte for byte
// what json.Marshal(d) returns when d.Body is already as json.Marshal
// writes a json.RawMessage (compact, <, > and & escaped; json.Marshal's
// own output is), which is appended without another pass over it. Errors
// are json.Marshal's (a time outside years 0-9999); on error b is returned
// unextended.
func AppendWebhookDelivery(b []byte, d *WebhookDelivery) ([]byte, error) {
	dst := b
	b = append(b, `{"messageId":`...)
	b = AppendJSONString(b, d.MessageID)
	b = append(b, `,"event":`...)
	b = AppendJSONString(b, d.Event)
	b = append(b, `,"targetKind":`...)
	b = AppendJSONString(b, d.TargetKind)
	b = append(b, `,"targetId":`...)
	b = AppendJSONString(b, d.TargetID)
	b = append(b, `,"url":`...)
	b = AppendJSONString(b, d.URL)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(d.Attempt), 10)
	if d.Throttled != 0 {
		b = append(b, `,"throttled":`...)
		b = strconv.AppendInt(b, int64(d.Throttled), 10)
	}
	b = append(b, `,"firstAt":"`...)
	var err error
	if b, err = d.FirstAt.AppendText(b); err != nil {
		p, err := json.Marshal(d)
		if err != nil {
			return dst, err
		}
		return append(dst, p...), nil
	}
	b = append(b, `","body":`...)
	if d.Body == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, d.Body...)
	}
	if d.Replay {
		b = append(b, `,"replay":true`...)
	}
	return append(b, '}'), nil
}
