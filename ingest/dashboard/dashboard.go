// Package dashboard serves the dashboard's server-rendered pages at the
// site root (html/template with go:embed, plain forms that work without
// JavaScript): / sends a signed-in member to their first page and anyone
// else to /login. Pages: API keys, members, tracking tokens, webhook endpoints
// (with their deliveries and replay), OAuth apps, connected apps, the
// request log and the message log (htmx and uPlot, vendored and served
// from /static/, only where they help). A page asked for without a session redirects to
// /login and back; its forms are refused cross-origin
// (Route.SameOrigin, net/http.CrossOriginProtection) like the sign-in
// form. Sign-in and sign-out are package members' pages.
package dashboard

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/members"
	"sendstream/ingest/oauth"
	"sendstream/ingest/transactional"
	"sendstream/ingest/webhooks"
	whlog "sendstream/sinks/webhooklog"
)

//go:embed *.html
var files embed.FS

var funcs = template.FuncMap{
	"stamp": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04 UTC")
		case *time.Time:
			if v != nil {
				return v.UTC().Format("2006-01-02 15:04 UTC")
			}
		}
		return ""
	},
}

var (
	keysTmpl  = pageTemplate("api_keys.html")
	errorTmpl = pageTemplate("error.html")
)

// pageTemplate parses a page's template (the file name) into the layout,
// with funcs and pageFuncs.
func pageTemplate(page string) *template.Template {
	return template.Must(template.New("").Funcs(funcs).Funcs(pageFuncs).ParseFS(files, "layout.html", page))
}

// pageRoute is the GET route of a page: no credential, the page resolves
// the session itself.
func pageRoute(path string, h func(*ingest.Call) ingest.Result) ingest.Route {
	return ingest.Route{Method: "GET", Path: path, Credential: ingest.CredNone, Handle: h}
}

// formRoute is the POST route of a page's form: no credential, refused
// cross-origin (SameOrigin), the url-encoded body read raw.
func formRoute(path string, h func(*ingest.Call) ingest.Result) ingest.Route {
	return ingest.Route{Method: "POST", Path: path, Credential: ingest.CredNone, SameOrigin: true, RawBody: true, Handle: h}
}

// Deps are what the pages need.
type Deps struct {
	// Sessions resolves the session cookie (members.Store).
	Sessions ingest.SessionResolver
	// Members lists, invites and removes the workspace's members (the
	// store POST /api/invitations and DELETE /api/members/{id} use); nil
	// makes the members page unavailable.
	Members *members.Store
	// Keys creates, lists and deletes API keys (the store the admin CLI
	// uses, so a deletion reaches every process's credential cache).
	Keys *auth.Store
	// OAuth keeps OAuth apps and their connections (the store
	// oauth.DashboardRoutes uses, so the pages apply the same rules).
	OAuth *oauth.Store
	// ClickHouse holds the request log and the message log's status
	// changes; nil makes those pages say they are unavailable.
	ClickHouse driver.Conn
	// Messages reads the message log (the store GET /v1/transactional reads).
	Messages *transactional.Store
	// Webhooks creates, rotates and changes the workspace's webhook
	// endpoints with the admin commands' checks (the server secret, the
	// SSRF guard with SENDSTREAM_WEBHOOK_ALLOW_PRIVATE); nil makes the
	// webhooks pages unavailable. Their deliveries are read from
	// ClickHouse (the webhook delivery log).
	Webhooks *webhooks.Endpoints
	// Publisher publishes a replayed webhook message to the deliveries
	// topic (the server's producer); nil refuses replays as unavailable.
	Publisher whlog.Publisher
}

// Routes are the dashboard's pages:
//
//	GET  /                                 303 to /settings/api-keys, or to /login?next=/
//	GET  /settings/api-keys                the keys (api_keys.manage; support staff read-only)
//	POST /settings/api-keys                create a key; the answer shows it once
//	POST /settings/api-keys/{id}/delete    delete a key; 303 back to the list
//
// and the pages each file's route list documents: memberRoutes, oauthAppRoutes,
// connectedAppRoutes, requestLogRoutes, messageLogRoutes, tokenRoutes
// (tracking tokens), webhookRoutes (endpoints, their deliveries and
// replay), staticRoutes (the embedded htmx and uPlot at /static/{name}).
func Routes(d Deps) []ingest.Route {
	routes := []ingest.Route{
		pageRoute("/", d.root),
		pageRoute(keysPath, d.keysPage),
		formRoute(keysPath, d.createKey),
		formRoute(keysPath+"/{id}/delete", d.deleteKey),
	}
	routes = append(routes, d.memberRoutes()...)
	routes = append(routes, d.oauthAppRoutes()...)
	routes = append(routes, d.connectedAppRoutes()...)
	routes = append(routes, d.requestLogRoutes()...)
	routes = append(routes, d.messageLogRoutes()...)
	routes = append(routes, d.tokenRoutes()...)
	routes = append(routes, d.webhookRoutes()...)
	return append(routes, d.staticRoutes()...)
}

// errNoSession says the call has no valid session.
var errNoSession = errors.New("not signed in")

// member resolves the call's session cookie: errNoSession without one,
// another error when the lookup failed.
func (d Deps) member(c *ingest.Call) (ingest.Principal, error) {
	tok := ingest.SessionToken(c.Header("Cookie"))
	if tok == "" || d.Sessions == nil {
		return ingest.Principal{}, errNoSession
	}
	p, _, err := d.Sessions.ResolveSession(c.Ctx, tok, time.Now())
	if errors.Is(err, ingest.ErrNoSession) {
		return ingest.Principal{}, errNoSession
	}
	return p, err
}

func (d Deps) root(c *ingest.Call) ingest.Result {
	_, err := d.member(c)
	switch {
	case err == nil:
		return redirect("/settings/api-keys")
	case errors.Is(err, errNoSession):
		return toLogin("/")
	}
	return unavailable()
}

// redirect answers 303 See Other to a path of this site.
func redirect(path string) ingest.Result {
	return ingest.Result{Status: 303, Headers: map[string]string{"Location": path, "Cache-Control": "no-store"}}
}

// toLogin sends the browser to sign in and come back to next.
func toLogin(next string) ingest.Result {
	return redirect("/login?next=" + url.QueryEscape(next))
}

// frame is what the layout shows around every page.
type frame struct {
	Title, Email, WorkspaceName, Error string
}

// frameOf is the frame of a page of p's titled title.
func frameOf(p ingest.Principal, title string) frame {
	return frame{}.titled(p, title)
}

// titled is f around a page of p's titled title, f's Error kept: a page's
// data carries only its error until the list around it is rendered.
func (f frame) titled(p ingest.Principal, title string) frame {
	f.Title, f.Email, f.WorkspaceName = title, p.Email, p.WorkspaceName
	return f
}

// checkBox is one checkbox of a page's form.
type checkBox struct {
	Name    string
	Checked bool
}

// boxes are the checkboxes of all, those in checked ticked (a refused
// form shown again as it was sent).
func boxes(all, checked []string) []checkBox {
	out := make([]checkBox, len(all))
	for i, n := range all {
		out[i] = checkBox{Name: n, Checked: slices.Contains(checked, n)}
	}
	return out
}

// formUnreadable is a page's error when its POST body is not a form.
const formUnreadable = "The form could not be read; try again."

// pageCSP is the policy of a page without scripts.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// render executes a page's template set under pageCSP.
func render(t *template.Template, status int, data any) ingest.Result {
	return renderPolicy(t, status, data, pageCSP, "")
}

// renderPolicy executes a page's template set and answers it with status
// under the Content-Security-Policy csp; vary names the request header
// the answer also depends on ("" for none). Pages are never cached (one
// shows a new key) and never framed.
func renderPolicy(t *template.Template, status int, data any, csp, vary string) ingest.Result {
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout", data); err != nil {
		return ingest.Fail(500, "internal_error", "rendering the page: "+err.Error())
	}
	h := map[string]string{"Cache-Control": "no-store", "Content-Security-Policy": csp, "X-Frame-Options": "DENY"}
	if vary != "" {
		h["Vary"] = vary
	}
	return ingest.Result{Status: status, Raw: b.Bytes(), ContentType: "text/html; charset=utf-8", Headers: h}
}

// errorPage is a page that only says what went wrong (in the layout).
func errorPage(p ingest.Principal, status int, msg string) ingest.Result {
	return render(errorTmpl, status, frame{Error: msg}.titled(p, "Not allowed"))
}

// unavailable is the answer when the session or the store cannot be read.
func unavailable() ingest.Result {
	return ingest.Result{Status: 503, Raw: []byte("The dashboard is unavailable right now; try again later.\n"), ContentType: "text/plain; charset=utf-8"}
}

// inWords is a store refusal as a sentence: without what wraps the
// sentinel and the sentinel's own text ("not allowed: ", "invalid: ",
// "invalid OAuth app: "), capitalised, with a full stop.
func inWords(err, sentinel error) string {
	s := err.Error()
	if i := strings.Index(s, sentinel.Error()+": "); i >= 0 {
		s = s[i+len(sentinel.Error())+2:]
	}
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
