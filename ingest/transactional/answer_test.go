package transactional

import (
	"encoding/json"
	"testing"
)

// The send answer is written by hand; it must be what encoding/json
// writes, since the request log stores it as compact JSON unchecked.
func TestSendAnswerEncodesAsEncodingJSON(t *testing.T) {
	ext, contact := `ord-1 "<&>" é`+"\u2028", "c1"
	for _, a := range []sendAnswer{
		{ID: "m1", Status: "queued", To: "a@x.io", MessageID: "<id@x>", Warnings: []string{}},
		{ID: "m2", Status: "sent", To: "b@x.io", MessageID: "m", ExternalID: &ext, ContactID: &contact, Deduplicated: true,
			Warnings: []string{"data.name", "x\n\"y\""}},
		{ID: "m3", Status: "queued", To: "c@x.io", MessageID: "m\xff"},
	} {
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON\n got %s\nwant %s", got, want)
		}
	}
}
