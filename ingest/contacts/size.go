package contacts

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"sendstream/pipeline"
)

// MaxContactValues bounds what one request may write into a contact,
// counted as the contact.created/updated envelope encodes it: every
// envelope about the contact carries its values, and they must fit
// pipeline.MaxEnvelopeBytes with the rest of the envelope. The body caps of
// spec 8.2 do not bound it: the envelope is JSON as encoding/json writes it,
// which spells each <, > and & as a six-byte \u escape, and Postgres gives
// numbers back written out in full (1e100000 is 100,001 digits). Nothing
// else limits a text field: the spec shows no length for any of them.
const MaxContactValues = pipeline.MaxEnvelopeBytes - 1<<20

// escapeGrowth is how many bytes longer the bytes of s get when
// encoding/json writes them into a string: five more for each <, > and &,
// three more for each U+2028 and U+2029. (Quotes, backslashes and control
// characters arrive escaped in a request and keep their length.)
func escapeGrowth[T string | []byte](s T) int64 {
	var n int64
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '<' || c == '>' || c == '&':
			n += 5
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xa8:
			n += 3
			i += 2
		}
	}
	return n
}

// textSize is an upper bound of the length of s written as a JSON string
// by encoding/json: its quotes, every byte, and the escapes.
func textSize(s string) int64 {
	var n int64 = 2 + int64(len(s)) + escapeGrowth(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}

// Values are the contact values of one request, as sent: nil or empty for
// what the request does not write.
type Values struct {
	FirstName, Country, Language, Source *string
	// CustomFields holds the raw value of each key the request writes.
	CustomFields map[string]json.RawMessage
	// Metadata is the raw metadata object.
	Metadata json.RawMessage
}

// CheckSize reports whether v fits MaxContactValues once stored and
// published. When it does not, field names the value that takes the most
// and msg says why, for a 400 naming it. Called by the request validation
// of every path that writes a contact, before anything is stored.
func CheckSize(v Values) (field, msg string, ok bool) {
	var total, most int64
	add := func(name string, n int64) {
		total += n
		if n > most {
			field, most = name, n
		}
	}
	for _, t := range []struct {
		name string
		s    *string
	}{{"firstName", v.FirstName}, {"country", v.Country}, {"language", v.Language}, {"source", v.Source}} {
		if t.s != nil {
			add(t.name, textSize(*t.s))
		}
	}
	for k, raw := range v.CustomFields {
		n, _, _ := jsonbSize(raw) // a number jsonb cannot hold is refused by its type check
		add("customFields."+k, textSize(k)+2+n)
	}
	if v.Metadata != nil {
		n, _, _ := jsonbSize(v.Metadata)
		add("metadata", n)
	}
	if total <= MaxContactValues {
		return "", "", true
	}
	return field, "makes the contact's values take " + strconv.FormatInt(total, 10) +
		" bytes once stored and published (each <, > and & is written as a six-byte \\u escape, numbers in full digits), over the " +
		strconv.Itoa(MaxContactValues) + " a contact event can carry", false
}

//go:embed sql/values_size.sql
var sqlValuesSize string

// growthCheckFrom is the size of a write's own values above which an
// upsert first reads what the stored contact carries (one extra query,
// only for writes of this size): a contact accumulates custom fields over
// many writes, each within the body cap.
const growthCheckFrom = 64 << 10

// fieldsSize is what the values f writes take in a contact event (an
// upper bound), and the one that takes the most. Custom field values are
// as CustomFieldPatch normalizes them.
func fieldsSize(f Fields) (total int64, largest string) {
	var most int64
	add := func(name string, n int64) {
		total += n
		if n > most {
			largest, most = name, n
		}
	}
	for _, t := range []struct {
		name string
		s    *string
	}{{"firstName", f.FirstName}, {"country", f.Country}, {"language", f.Language}} {
		if t.s != nil {
			add(t.name, textSize(*t.s))
		}
	}
	for k, v := range f.CustomFields {
		n := int64(4) // null, true, false
		switch x := v.(type) {
		case string:
			n = textSize(x)
		case json.Number:
			n, _ = numericTextLen([]byte(x))
		case bool:
			n = 5
		}
		add("customFields."+k, textSize(k)+2+n)
	}
	return total, largest
}

// CheckGrowth reports an update that would make the stored contact (ws,
// email) carry more than MaxContactValues in its events: the stored values
// it keeps plus the ones f writes (custom field values as CustomFieldPatch
// gives them). field names the value of f that takes the most, msg says
// why; both are empty when the update fits or the contact does not exist.
// Writes smaller than growthCheckFrom are not checked (no query on the
// common path); concurrent large writes of different keys are each checked
// against what was stored before them. Called by every path that updates
// a contact, before it writes; an error means the check could not run.
func (s *Store) CheckGrowth(ctx context.Context, ws, email string, f Fields) (field, msg string, err error) {
	own, largest := fieldsSize(f)
	if own <= growthCheckFrom {
		return "", "", nil
	}
	keys := make([]string, 0, len(f.CustomFields))
	for k := range f.CustomFields {
		keys = append(keys, k)
	}
	rows, err := s.pool.Query(ctx, sqlValuesSize, ws, email, keys)
	if err != nil {
		return "", "", fmt.Errorf("size of contact %s in %s: %w", email, ws, err)
	}
	defer rows.Close()
	kept := own
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return "", "", fmt.Errorf("size of contact %s in %s: %w", email, ws, err)
		}
		switch {
		case strings.HasPrefix(k, "customFields."):
			kept -= n // replaced by this write
		case k == "firstName" && f.FirstName != nil, k == "country" && f.Country != nil, k == "language" && f.Language != nil:
			// replaced by this write
		default:
			kept += n
		}
	}
	if err := rows.Err(); err != nil {
		return "", "", fmt.Errorf("size of contact %s in %s: %w", email, ws, err)
	}
	if kept <= MaxContactValues {
		return "", "", nil
	}
	return largest, "makes the contact's values take " + strconv.FormatInt(kept, 10) +
		" bytes once stored and published, with the values it already has (each <, > and & is written as a six-byte \\u escape, numbers in full digits), over the " +
		strconv.Itoa(MaxContactValues) + " a contact event can carry", nil
}
