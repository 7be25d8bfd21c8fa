package contacts

import (
	"encoding/json"
	"strings"
	"testing"

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
