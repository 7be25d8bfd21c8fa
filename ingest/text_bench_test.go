package ingest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"sendstream/schemas"
)

// BenchmarkBodyChecks measures what the text rule adds to the JSON check
// every body already gets: CompactJSON alone, then checkJSON (CompactJSON
// plus checkBodyText), on a send with 10 KB of HTML, an event, and a body
// of escaped non-ASCII (as Python's json.dumps writes it).
func BenchmarkBodyChecks(b *testing.B) {
	html := strings.Repeat(`<p class=\"x\">Hello {{ contact.first_name }}, your order ships today.</p>\n`, 140)
	bodies := map[string]string{
		"send-10KB": `{"to":"a@example.com","subject":"Order {{ data.order }}","htmlContent":"` + html + `","data":{"order":"A-1","items":[{"n":"x","q":1}]}}`,
		"event":     `{"email":"a@example.com","name":"purchase","properties":{"plan":"pro","value":12.5},"externalId":"e-1"}`,
		"escaped":   `{"email":"a@example.com","firstName":"` + strings.Repeat(`J\u00f6rg \ud83d\ude00 `, 200) + `"}`,
	}
	for name, body := range bodies {
		p := []byte(body)
		b.Run(name+"/CompactJSON", func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if ok, _ := schemas.CompactJSON(p); !ok {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(name+"/checkJSON", func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			var compact bool
			for b.Loop() {
				if _, ok := checkJSON([]byte("application/json"), p, false, &compact); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

func BenchmarkTextParts(b *testing.B) {
	html := strings.Repeat(`<p class=\"x\">Hello {{ contact.first_name }}, your order ships today.</p>\n`, 140)
	p := []byte(`{"to":"a@example.com","subject":"Order {{ data.order }}","htmlContent":"` + html + `"}`)
	b.Run("utf8.Valid", func(b *testing.B) {
		for b.Loop() {
			_ = utf8.Valid(p)
		}
	})
}
