package contacts

import (
	"context"
	"strings"
	"testing"

	"sendstream/deploy/stack"
)

// TestStoredSizesMatchPostgres checks numericTextLen against what Postgres
// itself answers for each number (its length as jsonb text, or an error),
// and that jsonbSize never underestimates a stored document.
func TestStoredSizesMatchPostgres(t *testing.T) {
	pool := stack.PG(t)
	ctx := context.Background()
	for _, num := range []string{
		"0", "-0", "-0.0", "1", "-1", "12.50", "1.2300e1", "1E+2", "1e+0", "1e-0", "0.000e5", "-0.000e-3",
		"1e400", "1E-400", "1e-16383", "1e-16384", "12e-16384", "0e-16383", "0e-16384",
		"5e131071", "-5e131071", "0.5e131072", "1e131072", "100e131070", "0.001e131074",
		"0e1073741822", "0e1073741823", "1e-1073741822", "1e99999999999", "123456789012345678901234567890.123e-5",
	} {
		var got int64
		err := pool.QueryRow(ctx, "SELECT length(($1::text)::jsonb::text)", num).Scan(&got)
		n, fits := numericTextLen([]byte(num))
		if (err == nil) != fits {
			t.Errorf("%s: Postgres error %v, numericTextLen fits %v", num, err, fits)
			continue
		}
		if err == nil && n != got {
			t.Errorf("%s: Postgres length %d, numericTextLen %d", num, got, n)
		}
	}
	for _, doc := range []string{
		`{}`, `[]`, `{"a":1,"b":[1,2,3],"c":{"d":null,"e":true}}`, `{"a":"x\"y\\z\u00e9\n","a":2}`,
		`{ "a" : [ 1e3 , -2.50e-3 , "s" ] }`, `[` + strings.Repeat(`{"k":[1,2]},`, 100) + `0]`,
	} {
		var got int64
		if err := pool.QueryRow(ctx, "SELECT length(($1::text)::jsonb::text)", doc).Scan(&got); err != nil {
			t.Fatal(doc, err)
		}
		n, _, ok := jsonbSize([]byte(doc))
		if !ok || n < got {
			t.Errorf("%.60s: stored %d bytes, jsonbSize %d (ok %v)", doc, got, n, ok)
		}
	}
}
