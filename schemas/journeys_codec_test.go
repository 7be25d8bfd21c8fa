package schemas

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestJourneyStepDoneCodecMatchesEncodingJSON: the hand encoder writes
// what json.Marshal writes, and the decoder reads it (and what
// json.Marshal writes) as json.Unmarshal does.
func TestJourneyStepDoneCodecMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 1, 2, 345678900, time.UTC)
	for _, d := range []JourneyStepDone{
		{At: at},
		{ExecutionID: "e1", JourneyID: "j1", Version: 3, ContactID: "c1", Step: "2.yes.0", StepType: StepSendEmail,
			Outcome: StepOutcomeDone, MessageID: "m1", Detail: "x\"<&>\u2028\xff", At: at.In(time.FixedZone("x", 3600)),
			Final: "completed", Email: "a+b@example.com"},
		{ExecutionID: "e2", Version: -1, Step: "0", StepType: StepDelay, Outcome: StepOutcomeDone, At: at},
	} {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendJourneyStepDone([]byte("x"), &d)
		if err != nil || !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("AppendJourneyStepDone:\n got %s, %v\nwant x%s", got, err, want)
		}
		dec, err := DecodeJourneyStepDone(want)
		var ref JourneyStepDone
		if uerr := json.Unmarshal(want, &ref); err != nil || uerr != nil || !reflect.DeepEqual(dec, ref) {
			t.Fatalf("DecodeJourneyStepDone(%s) = %+v, %v; json.Unmarshal %+v, %v", want, dec, err, ref, uerr)
		}
	}
	bad := JourneyStepDone{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := AppendJourneyStepDone(nil, &bad); err == nil {
		t.Error("a year past 9999 encoded; json.Marshal refuses it")
	}
	for _, b := range []string{``, `[]`, `{"step":1}`, `{"version":"1"}`, `{"version":1.5}`, `{"at":"soon"}`, `{"step":"x"`, `{"step":"x"} y`} {
		if _, err := DecodeJourneyStepDone([]byte(b)); err == nil {
			t.Errorf("decoded %q", b)
		}
	}
	d, err := DecodeJourneyStepDone([]byte(` {"version":null,"step":"1","other":[1,{"a":2}],"final":null} `))
	if err != nil || d.Step != "1" || d.Version != 0 || d.Final != "" {
		t.Errorf("nulls and unknown members: %+v, %v", d, err)
	}
}
