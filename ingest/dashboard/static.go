package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"path"
	"strings"
	"time"

	"sendstream/ingest"
)

// staticFiles are the vendored scripts (deploy/vendor-dashboard.sh writes
// htmx and uPlot with their licences) and the dashboard's own scripts,
// served at /static/<name>.
//
//go:embed static
var staticFiles embed.FS

// staticTypes are the content types of what /static serves; other files
// of the folder (VERSIONS.txt) are served as plain text.
var staticTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".txt": "text/plain; charset=utf-8",
}

// staticTag is a short hash of every static file: the pages ask for
// /static/<name>?v=<tag>, so a new build's files are fetched despite the
// year-long cache.
var staticTag = func() string {
	h := sha256.New()
	_ = fs.WalkDir(staticFiles, "static", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := staticFiles.ReadFile(p)
		h.Write([]byte(p))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}()

// pageFuncs are what pages use beside funcs (pageTemplate gives every
// page both): static (the URL of an embedded file) and seconds (a time
// to the second, UTC).
var pageFuncs = template.FuncMap{
	"static":  func(name string) string { return "/static/" + name + "?v=" + staticTag },
	"seconds": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
}

// staticRoutes serve the embedded files with a year-long cache (the
// pages' URLs change with staticTag) and nosniff.
func (d Deps) staticRoutes() []ingest.Route {
	return []ingest.Route{pageRoute("/static/{name}", serveStatic)}
}

func serveStatic(c *ingest.Call) ingest.Result {
	name := c.Params["name"]
	if name == "" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return notFoundText()
	}
	b, err := staticFiles.ReadFile("static/" + name)
	if err != nil {
		return notFoundText()
	}
	ct, ok := staticTypes[path.Ext(name)]
	if !ok {
		return notFoundText()
	}
	return ingest.Result{Status: 200, Raw: b, ContentType: ct, Headers: map[string]string{
		"Cache-Control":          "public, max-age=31536000, immutable",
		"X-Content-Type-Options": "nosniff",
	}}
}

func notFoundText() ingest.Result {
	return ingest.Result{Status: 404, Raw: []byte("Not found.\n"), ContentType: "text/plain; charset=utf-8",
		Headers: map[string]string{"X-Content-Type-Options": "nosniff"}}
}

// scriptCSP is the pages' policy where they load scripts: only this
// site's /static files run (no inline script, no eval); inline styles as
// on every page (the layout's, htmx's indicator and uPlot's).
const scriptCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// renderFiltered renders a page that loads /static scripts (htmx, uPlot)
// and whose GET filter form htmx submits: under scriptCSP instead of
// pageCSP, varying with HX-Request. htmx swaps only 2xx answers, so a
// refused filter (its error shown in the swapped part) answers htmx with
// 200; without htmx the page answers with its real status.
func renderFiltered(c *ingest.Call, t *template.Template, status int, data any) ingest.Result {
	if status != 200 && c.Header("HX-Request") == "true" {
		status = 200
	}
	return renderPolicy(t, status, data, scriptCSP, "HX-Request")
}
