package contacts

import (
	"reflect"
	"testing"
	"time"
)

// TestOutboxRowsOfBothLayoutsRelayTheSameEvents: an upsert's outbox row
// written before 0088_contact_outbox_columns.sql (everything in data) and
// one written after it (the contact in columns, data {"old": ...}) rebuild
// the same envelopes, equal to what the request published.
func TestOutboxRowsOfBothLayoutsRelayTheSameEvents(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 123456000, time.UTC)
	ann, de := "Ann", "DE"
	c := Contact{ID: "c1", Email: "a@example.com", FirstName: &ann, Country: &de, Status: StatusActive,
		CustomFields: []byte(`{"plan": "pro"}`), Metadata: []byte(`{"k": 1}`), CreatedAt: at, UpdatedAt: at.Add(time.Second)}
	src := "api"
	c.Source = &src
	legacy := []byte(`{"rid":"req1","contact":{"id":"c1","email":"a@example.com","firstName":"Ann","country":"DE",` +
		`"language":null,"status":"ACTIVE","source":"api","customFields":{"plan": "pro"},` +
		`"createdAt":"2026-11-27T12:00:00.123456+00:00","updatedAt":"2026-11-27T12:00:01.123456+00:00"},` +
		`"old":{"firstName":"Bea","country":"DE","language":null,"customFields":{"plan": "pro"}}}`)
	local := time.FixedZone("x", 3600)
	created, updated := at.In(local), at.Add(time.Second).In(local)
	rid, status := "req1", StatusActive
	cols := &outboxContact{contactID: "c1", rid: &rid, email: &c.Email, firstName: &ann, country: &de, status: &status,
		source: &src, custom: []byte(`{"plan": "pro"}`), createdAt: &created, updatedAt: &updated}
	columns := []byte(`{"old":{"firstName":"Bea","country":"DE","language":null,"customFields":{"plan": "pro"}}}`)

	want := UpsertMessages("ws", "req1", UpsertResult{Contact: c, Changed: []string{"firstName"}})
	for name, got := range map[string]func() ([]byte, *outboxContact){
		"legacy":  func() ([]byte, *outboxContact) { return legacy, &outboxContact{contactID: "c1"} },
		"columns": func() ([]byte, *outboxContact) { return columns, cols },
	} {
		data, oc := got()
		msgs, err := outboxMessages("ws", "updated", data, []byte(`{"k": 1}`), oc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(msgs, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, msgs, want)
		}
	}
}
