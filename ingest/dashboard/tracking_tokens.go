package dashboard

import (
	"errors"
	"net/url"
	"strings"

	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/members"
)

// The tracking tokens page (spec 2.7, 4.7, 5.2): a tracking token records
// events from a website and nothing else; it may be limited to domains.

const tokensPath = "/settings/tracking-tokens"

var tokensTmpl = pageTemplate("tracking_tokens.html")

// tokenRoutes are the tracking tokens page's routes (Routes lists them).
func (d Deps) tokenRoutes() []ingest.Route {
	return []ingest.Route{
		pageRoute(tokensPath, d.tokensPage),
		formRoute(tokensPath, d.createToken),
		formRoute(tokensPath+"/{id}/delete", d.deleteToken),
	}
}

// tokensData is what tracking_tokens.html shows.
type tokensData struct {
	frame
	Tokens    []auth.TrackingToken
	CanManage bool   // the forms: tracking_tokens.manage
	ReadOnly  bool   // support staff: the list only
	Form      string // the domains typed, kept when refused
	Created   string // the new token, shown once in the POST's answer
}

// tokensRule: tracking_tokens.manage (owners, admins, members by
// default, custom roles that name it) manages the tokens; support staff
// read them; other members are refused.
var tokensRule = rule{back: tokensPath, perm: members.PermTrackingTokens,
	ready:   func(d Deps) bool { return d.Keys != nil },
	support: "Support staff have read-only access: tracking tokens cannot be created or deleted.",
	denied:  "Managing tracking tokens needs the tracking_tokens.manage permission; ask an owner or admin."}

// tokensPageWith lists the tokens around data's form state; status is the
// answer's.
func (d Deps) tokensPageWith(c *ingest.Call, p ingest.Principal, status int, data tokensData) ingest.Result {
	manage := tokensRule.manages(p)
	toks, err := d.Keys.ListTrackingTokens(c.Ctx, p.Workspace)
	if err != nil {
		return unavailable()
	}
	data.frame = data.frame.titled(p, "Tracking tokens")
	data.Tokens, data.CanManage, data.ReadOnly = toks, manage, !manage
	return render(tokensTmpl, status, data)
}

func (d Deps) tokensPage(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, tokensRule, false)
	if !ok {
		return res
	}
	return d.tokensPageWith(c, p, 200, tokensData{})
}

func (d Deps) createToken(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, tokensRule, true)
	if !ok {
		return res
	}
	form, err := url.ParseQuery(string(c.Body))
	if err != nil {
		return d.tokensPageWith(c, p, 400, tokensData{frame: frame{Error: formUnreadable}})
	}
	typed := form.Get("domains")
	domains := strings.FieldsFunc(typed, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	for _, dom := range domains {
		if strings.ContainsAny(dom, "/:") {
			return d.tokensPageWith(c, p, 400, tokensData{frame: frame{Error: "“" + dom + "” is not a domain name: give the host only, without a scheme, port or path (example.com)."}, Form: typed})
		}
	}
	_, tok, err := d.Keys.CreateTrackingToken(c.Ctx, p.Workspace, domains)
	if err != nil {
		return unavailable()
	}
	return d.tokensPageWith(c, p, 200, tokensData{Created: tok})
}

func (d Deps) deleteToken(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, tokensRule, true)
	if !ok {
		return res
	}
	err := d.Keys.DeleteTrackingToken(c.Ctx, p.Workspace, c.Params["id"])
	switch {
	case err == nil:
		return redirect(tokensPath)
	case errors.Is(err, auth.ErrNotFound):
		return d.tokensPageWith(c, p, 404, tokensData{frame: frame{Error: "No such tracking token in this workspace (already deleted?)."}})
	}
	return unavailable()
}
