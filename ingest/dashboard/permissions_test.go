package dashboard_test

import (
	"net/url"
	"strings"
)

// pageCall is one request to a page's routes: a GET when form is nil, a
// same-origin form POST otherwise.
type pageCall struct {
	method, path string
	form         url.Values
}

// expectRefused checks that the member behind cookie (who, for the
// messages) is answered 403 on every call with a page that says says and
// does not contain hidden (a mark of the list or of a created secret).
func (e *env) expectRefused(cookie, who string, calls []pageCall, says, hidden string) {
	e.t.Helper()
	for _, c := range calls {
		resp, body := e.do(c.method, c.path, cookie, c.form, nil)
		if resp.StatusCode != 403 || !strings.Contains(body, says) || strings.Contains(body, hidden) {
			e.t.Errorf("%s %s as %s: %d, want 403 saying %q without %q", c.method, c.path, who, resp.StatusCode, says, hidden)
		}
	}
}
