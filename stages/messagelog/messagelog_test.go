package messagelog

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
)

func TestDecode(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	send, _ := json.Marshal(schemas.SendPayload{MessageID: "m1", RFCMessageID: "m1@x", ExternalID: "e1", To: "a@b.test",
		Policy: schemas.PolicyRef{ID: "p1", Provider: "smtp"}, TemplateID: "t1", Subject: "s", HTML: strings.Repeat("<p>x</p>", 1000)})
	r, ok, err := Decode(schemas.Envelope{ID: "m1", Workspace: "w", Type: schemas.TypeTransactionalSend, OccurredAt: at, Payload: send}, at)
	if err != nil || !ok || r.Status != "queued" || r.Recipient != "a@b.test" || r.ExternalID != "e1" || r.PolicyID != "p1" || r.TemplateID != "t1" || r.Provider != "smtp" || !r.At.Equal(at) || r.MessageID != "m1" {
		t.Errorf("send row: %+v %v %v", r, ok, err)
	}
	st, _ := json.Marshal(schemas.StatusPayload{MessageID: "m1", Status: "bounced", At: at, To: "a@b.test", Detail: "hard: 550"})
	r, ok, err = Decode(schemas.Envelope{ID: "s1", Workspace: "w", Type: schemas.TypeTransactionalStatus, Payload: st}, at)
	if err != nil || !ok || r.Status != "bounced" || r.EventID != "s1" || r.Detail != "hard: 550" {
		t.Errorf("status row: %+v %v %v", r, ok, err)
	}
	if _, ok, err := Decode(schemas.Envelope{ID: "x", Type: "other.v1", Payload: []byte(`{}`)}, at); ok || err != nil {
		t.Errorf("other type: %v %v", ok, err)
	}
	if _, _, err := Decode(schemas.Envelope{ID: "x", Type: schemas.TypeTransactionalSend, Payload: []byte(`[1]`)}, at); err == nil {
		t.Error("malformed payload accepted")
	}
}

func TestDecodeSendFieldsStopsAtBodies(t *testing.T) {
	// Fields after the first Liquid source are not read, so a payload
	// whose tail is cut still decodes; an escaped recipient is unescaped.
	p, err := decodeSendFields([]byte(`{"messageId":"m","to":"a\u0040b.test","externalId":null,"policy":{"id":"p","provider":"smtp"},"templateId":"t","subject":"s","html":"<p>cut`))
	if err != nil || p.To != "a@b.test" || p.ExternalID != "" || p.Policy.ID != "p" || p.Policy.Provider != "smtp" || p.TemplateID != "t" {
		t.Fatalf("decodeSendFields = %+v, %v", p, err)
	}
	for _, bad := range []string{`{"to":1}`, `{"policy":"p"}`, `{"to":"a@b.test",`, `"x"`} {
		if _, err := decodeSendFields([]byte(bad)); err == nil {
			t.Errorf("decodeSendFields(%s): want an error", bad)
		}
	}
}

func BenchmarkDecodeSend(b *testing.B) {
	send, _ := json.Marshal(schemas.SendPayload{MessageID: "m1", RFCMessageID: "m1@x", ExternalID: "e1", To: "a@b.test",
		Policy: schemas.PolicyRef{ID: "p1", Provider: "smtp"}, TemplateID: "t1", Subject: "s", HTML: strings.Repeat("<p>x</p>", 300)})
	env := schemas.Envelope{ID: "m1", Workspace: "w", Type: schemas.TypeTransactionalSend, OccurredAt: time.Now(), Payload: send}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Decode(env, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTwoStagesOneLog: the package registers the queued rows' stage on
// TopicTransactional and the status rows' stage on TopicMessageStatus,
// the topic the delivery stage writes and does not read.
func TestTwoStagesOneLog(t *testing.T) {
	for name, topic := range map[string]string{Name: schemas.TopicTransactional, StatusName: schemas.TopicMessageStatus} {
		reg, ok := pipeline.Lookup(name)
		if !ok || reg.Consumes != topic || len(reg.Produces) != 0 {
			t.Errorf("stage %s: %+v, want it reading %s and producing nothing", name, reg, topic)
		}
	}
}
