package schemas

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestAppendSendPayloadCompactData: data promised compact is copied as it
// is only when json.Marshal would copy it too; data with a character
// json.Marshal escapes still comes out as json.Marshal writes it.
func TestAppendSendPayloadCompactData(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 1, 2, 345678900, time.UTC)
	for _, d := range []string{`{"a":1,"b":["x y",{"c":null}]}`, `{"h":"<b>&amp;</b>"}`, "{\"l\":\"\u2028\"}", `{"e":"\u00e9\"\\"}`} {
		p := SendPayload{MessageID: "m", To: "t@x.test", HTML: "<p>", Data: json.RawMessage(d), DataCompact: true, AcceptedAt: at}
		got, err := AppendSendPayload(nil, &p)
		if err != nil {
			t.Fatal(err)
		}
		p.DataCompact = false
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("data %s:\n got %s\nwant %s", d, got, want)
		}
	}
}
