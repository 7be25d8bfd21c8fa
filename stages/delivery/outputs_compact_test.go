package delivery

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"sendstream/schemas"
)

// TestOutputsPublishAsMarshal: the status and webhook envelopes promise a
// compact payload, so the producer copies them unchecked; they must then be
// exactly what json.Marshal writes, whatever the strings hold.
func TestOutputsPublishAsMarshal(t *testing.T) {
	env := schemas.Envelope{ID: "e1", Workspace: "w", Type: schemas.TypeTransactionalSend, Key: "w:m1"}
	p := schemas.SendPayload{MessageID: "m1", To: "a<b>&\u2028\"c\"@example.com", ExternalID: "x\\y\x01",
		TemplateID: "t", Policy: schemas.PolicyRef{ID: "p", Provider: "smtp"}}
	for _, r := range []result{
		{status: schemas.MessageSent, providerID: "id<1>", refused: []string{"c&d@example.com"}, at: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)},
		{status: schemas.MessageFailed, reason: "550 <no> such \"user\"\n", at: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))},
	} {
		outs, err := outputs(env, &p, r, hooks{sent: true, failed: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 2 {
			t.Fatalf("%s: %d outputs, want 2", r.status, len(outs))
		}
		for _, o := range outs {
			if !o.PayloadCompact {
				t.Errorf("%s: %s without PayloadCompact", r.status, o.Type)
			}
			got, err := schemas.AppendEnvelope(nil, &o)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := json.Marshal(&o)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, ref) {
				t.Errorf("%s: %s published as\n%s\nwant\n%s", r.status, o.Type, got, ref)
			}
		}
	}
}
