package dashboard_test

import (
	"os"
	"strings"
	"testing"
)

// TestStaticFilesServedEmbedded: the vendored scripts and their licences
// are served from the binary with a year-long cache; other paths are not.
func TestStaticFilesServedEmbedded(t *testing.T) {
	e := start(t)
	for name, ctype := range map[string]string{
		"htmx.min.js":       "text/javascript; charset=utf-8",
		"uPlot.iife.min.js": "text/javascript; charset=utf-8",
		"uPlot.min.css":     "text/css; charset=utf-8",
		"messages-chart.js": "text/javascript; charset=utf-8",
		"htmx.LICENSE.txt":  "text/plain; charset=utf-8",
		"uPlot.LICENSE.txt": "text/plain; charset=utf-8",
	} {
		want, err := os.ReadFile("static/" + name)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := e.do("GET", "/static/"+name+"?v=any", "", nil, nil)
		if resp.StatusCode != 200 || body != string(want) || resp.Header.Get("Content-Type") != ctype {
			t.Errorf("GET /static/%s: %d %q, %d bytes, want 200 %s with the file", name, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), ctype)
		}
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=31536000") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /static/%s: Cache-Control %q, nosniff %q", name, cc, resp.Header.Get("X-Content-Type-Options"))
		}
	}
	for _, path := range []string{"/static/nope.js", "/static/..%2Fdashboard.go", "/static/.hidden.js", "/static/dashboard.go"} {
		if resp, _ := e.do("GET", path, "", nil, nil); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}
