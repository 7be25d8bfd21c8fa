package contacts

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/schemas"
)

// TestSizesBoundTheEnvelope: textSize and jsonbSize never underestimate
// what the contact envelope's encoding (encoding/json's escapes of <, > and
// &, U+2028 and U+2029) writes for a value, and CheckSize names the value
// that takes the most once the total is over MaxContactValues.
func TestSizesBoundTheEnvelope(t *testing.T) {
	for _, s := range []string{"", "Ada", "<b>&amp;</b>", "é\u2028\u2029x", "quote\" back\\ nl\n tab\t \x01", strings.Repeat("<", 1000)} {
		if got, enc := textSize(s), len(schemas.AppendJSONString(nil, s)); got < int64(enc) {
			t.Errorf("textSize(%.20q) = %d, encoded %d", s, got, enc)
		}
		raw, _ := json.Marshal(map[string]string{"k": s})
		enc, err := json.Marshal(json.RawMessage(raw))
		if n, _, ok := jsonbSize(raw); err != nil || !ok || n < int64(len(enc)) {
			t.Errorf("jsonbSize(%.30s) = %d, encoded %d", raw, n, len(enc))
		}
	}
	big := strings.Repeat("<", MaxContactValues/6+1)
	small := "x"
	if field, _, ok := CheckSize(Values{FirstName: &small, Country: &big}); ok || field != "country" {
		t.Errorf("CheckSize of %d bytes of '<': ok %v, field %q", len(big), ok, field)
	}
	plain := strings.Repeat("x", 16<<20)
	if _, msg, ok := CheckSize(Values{FirstName: &plain, CustomFields: map[string]json.RawMessage{"bio": json.RawMessage(`"` + plain + `"`)}}); !ok {
		t.Errorf("32 MB of plain text refused: %s", msg)
	}
}

// TestCheckGrowth: an update whose own values are large is checked against
// what the stored contact already carries: a second large custom field that
// would take the contact's events past MaxContactValues is refused naming
// it, while replacing the large value, or writing to a contact that does
// not exist, passes. (The stored contact is written in SQL, so no 60 MB
// event is published.)
func TestCheckGrowth(t *testing.T) {
	pool := stack.PG(t)
	ctx := context.Background()
	ws := "ws_growth_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := pool.Exec(ctx, `INSERT INTO workspaces (id, name) VALUES ($1, 'growth')`, ws); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DELETE FROM workspaces WHERE id = $1`, ws) })
	// 10.5 million '<': 63 MB in an event, under MaxContactValues alone.
	if _, err := pool.Exec(ctx, `INSERT INTO contacts (id, workspace_id, seq, email, first_name, custom_fields)
		VALUES ('c_growth', $1, 1, 'big@example.com', 'Ada', jsonb_build_object('a', repeat('<', 10500000)))`, ws); err != nil {
		t.Fatal(err)
	}
	s := NewStore(pool)
	t.Cleanup(s.Close)
	big := strings.Repeat("&", 1<<20) // 6 MB in an event
	for _, tc := range []struct {
		name, email string
		f           Fields
		refused     string
	}{
		{"a second large field", "big@example.com", Fields{CustomFields: map[string]any{"b": big}}, "customFields.b"},
		{"a large first name", "big@example.com", Fields{FirstName: &big}, "firstName"},
		{"replacing the large field", "big@example.com", Fields{CustomFields: map[string]any{"a": big}}, ""},
		{"a contact that does not exist", "new@example.com", Fields{CustomFields: map[string]any{"b": big}}, ""},
		{"a small write (not checked)", "big@example.com", Fields{CustomFields: map[string]any{"b": "<<<"}}, ""},
	} {
		field, msg, err := s.CheckGrowth(ctx, ws, tc.email, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if field != tc.refused {
			t.Errorf("%s: refused %q (%s), want %q", tc.name, field, msg, tc.refused)
		}
	}
}
