package schemas

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func sampleStatusPayloads() []StatusPayload {
	at := time.Date(2026, 11, 22, 9, 1, 2, 345678900, time.UTC)
	return []StatusPayload{
		{At: at},
		{MessageID: "m1", Status: MessageSent, At: at.In(time.FixedZone("x", -7200)), To: "to@x.test", ExternalID: "ext <1> & \u2028",
			TemplateID: "t", PolicyID: "p", Provider: "smtp", Detail: "refused copies: a\"b\n\xff"},
	}
}

// TestStatusPayloadCodecMatchesEncodingJSON: the hand encoder writes what
// json.Marshal writes, and the decoder reads it as json.Unmarshal does.
func TestStatusPayloadCodecMatchesEncodingJSON(t *testing.T) {
	for _, p := range sampleStatusPayloads() {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendStatusPayload([]byte("x"), &p)
		if err != nil || !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("AppendStatusPayload:\n got %s, %v\nwant x%s", got, err, want)
		}
		dec, err := DecodeStatusPayload(want)
		var ref StatusPayload
		if uerr := json.Unmarshal(want, &ref); err != nil || uerr != nil || !reflect.DeepEqual(dec, ref) {
			t.Fatalf("DecodeStatusPayload(%s) = %+v, %v; json.Unmarshal %+v, %v", want, dec, err, ref, uerr)
		}
	}
	bad := StatusPayload{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := AppendStatusPayload(nil, &bad); err == nil {
		t.Error("a year past 9999 encoded; json.Marshal refuses it")
	}
	for _, b := range []string{``, `[]`, `{"status":1}`, `{"at":"soon"}`, `{"to":"x"`, `{"to":"x"} y`} {
		if _, err := DecodeStatusPayload([]byte(b)); err == nil {
			t.Errorf("decoded %q", b)
		}
	}
}

func TestMessageEventDataEncodesAsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 1, 2, 5, time.FixedZone("y", 3600))
	for _, d := range []MessageEventData{{OccurredAt: at},
		{MessageID: "m", RFCMessageID: "<r@x>", Email: "a&b@x.test", ExternalID: "e\u2029", Provider: "smtp", OccurredAt: at.UTC()}} {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := AppendMessageEventData(nil, &d); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendMessageEventData:\n got %s, %v\nwant %s", got, err, want)
		}
	}
}

// FuzzStatusPayloadCodec varies the strings of a status payload.
func FuzzStatusPayloadCodec(f *testing.F) {
	f.Add("m1", "<a&b>\u2028\xff\"\\")
	f.Fuzz(func(t *testing.T, id, s string) {
		p := StatusPayload{MessageID: id, Status: s, At: time.Unix(1e9, 7).UTC(), To: s, ExternalID: s, Detail: id + s}
		want, err := json.Marshal(p)
		if err != nil {
			t.Skip()
		}
		got, err := AppendStatusPayload(nil, &p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendStatusPayload = %s, %v; json.Marshal = %s", got, err, want)
		}
		dec, err := DecodeStatusPayload(want)
		var ref StatusPayload
		if uerr := json.Unmarshal(want, &ref); err != nil || uerr != nil || !reflect.DeepEqual(dec, ref) {
			t.Fatalf("DecodeStatusPayload(%s) = %+v, %v; json.Unmarshal %+v", want, dec, err, ref)
		}
	})
}
