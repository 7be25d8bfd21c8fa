package events

import (
	"testing"
	"time"
)

var benchBody = []byte(`{"event":"purchase.completed","email":"u000123@bench.example.com","goalType":"purchase","value":49.95,"currency":"USD","externalId":"o-1a2b3c4d-000000000123","properties":{"plan":"pro","source":"bench","pad":"xxxxxxxxxxxxxxxx"}}`)

// BenchmarkParseAccept measures the handler's own work per event: parse,
// validate, build the envelope payload and the answer (no Postgres, no
// broker).
func BenchmarkParseAccept(b *testing.B) {
	now := time.Now().UTC()
	b.ReportAllocs()
	for b.Loop() {
		in, errs := Parse(benchBody, true)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		l := lookupOf("ws", &in)
		r := Resolution{ContactID: "c1"}
		a := accept("ws", &in, &l, &r, "api", now, true)
		_ = appendOutcome(make([]byte, 0, 128), a.id, a.contactID, a.dup)
	}
}
