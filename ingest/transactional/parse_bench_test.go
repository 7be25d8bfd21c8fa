package transactional

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchBody is a send like the bench's: a 2 KB inline template with data.
func benchBody() []byte {
	html := `<html><body>` + strings.Repeat(`<p style="font-size:16px;color:#51545e;">Thanks {{ name }} for order {{ order.number }}.</p>`, 22) + `</body></html>`
	b, _ := json.Marshal(map[string]any{"to": "u1@bench.example.com", "externalId": "tx-1", "subject": "Your order {{ order.number }}",
		"htmlContent": html, "data": map[string]any{"name": "Ada", "order": map[string]any{"number": "100001", "date": "2025-01-02", "currency": "EUR", "total": "86.50",
			"items": []any{map[string]any{"name": "Green tea", "quantity": 2, "price": "12.50"}, map[string]any{"name": "Teapot <blue>", "quantity": 1, "price": "49.00"}}},
			"address": map[string]any{"line1": "12 Example Street", "city": "Berlin", "zip": "10115"}}})
	return b
}

func BenchmarkParseSend(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, errs := parseSend(body, nil, ""); !errs.empty() {
			b.Fatal(errs.message())
		}
	}
}
