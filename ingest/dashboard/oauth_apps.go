package dashboard

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/members"
	"sendstream/ingest/oauth"
)

const appsPath = "/settings/oauth-apps"

var appsTmpl = pageTemplate("oauth_apps.html")

// oauthAppRoutes are the OAuth apps page (spec 5.3): the same oauth.Store
// calls as the JSON routes of oauth.DashboardRoutes, so both apply the
// same rules (plan, at most 10, api_keys.manage, support read-only).
//
//	GET  /settings/oauth-apps                        list (any member; support staff too)
//	POST /settings/oauth-apps                        create; a confidential app's secret is shown once
//	POST /settings/oauth-apps/{id}/rotate-secret     a new secret, shown once
//	POST /settings/oauth-apps/{id}/delete            revoke its connections, delete; 303 back
func (d Deps) oauthAppRoutes() []ingest.Route {
	return []ingest.Route{
		pageRoute(appsPath, d.appsPage),
		formRoute(appsPath, d.createApp),
		formRoute(appsPath+"/{id}/rotate-secret", d.rotateApp),
		formRoute(appsPath+"/{id}/delete", d.deleteApp),
	}
}

// appsData is what oauth_apps.html shows.
type appsData struct {
	frame
	Apps      []oauth.App
	CanManage bool // api_keys.manage: the forms
	Support   bool
	PlanOK    bool // Pro or Enterprise
	Plan      string
	Max       int
	Types     []checkBox
	Grants    []checkBox
	Scopes    []checkBox
	Form      appForm
	Secret    *appSecret // a new or rotated secret, shown once in the POST's answer
}

type appForm struct {
	Name, Type, RedirectURIs string
	Grants, Scopes           []string
}

type appSecret struct {
	AppName, ClientID, Secret string
	Rotated                   bool
}

// appsPageWith renders the list around data (the form state, an error or
// a secret); status is the answer's.
func (d Deps) appsPageWith(c *ingest.Call, p ingest.Principal, status int, data appsData) ingest.Result {
	apps, err := d.OAuth.Apps(c.Ctx, p.Workspace)
	if err != nil {
		return unavailable()
	}
	data.frame = data.frame.titled(p, "OAuth apps")
	data.Apps, data.CanManage, data.Support = apps, appsRule.manages(p), isSupport(p)
	data.Plan, data.PlanOK, data.Max = p.Plan, p.Plan == auth.PlanPro || p.Plan == auth.PlanEnterprise, oauth.MaxAppsPerWorkspace
	if data.Form.Type == "" {
		data.Form.Type = oauth.TypeConfidential
	}
	data.Types = boxes([]string{oauth.TypeConfidential, oauth.TypePublic}, []string{data.Form.Type})
	data.Grants = boxes(oauth.Grants, data.Form.Grants)
	data.Scopes = boxes(auth.Scopes, data.Form.Scopes)
	return render(appsTmpl, status, data)
}

func (d Deps) appsPage(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, appsRule, false)
	if !ok {
		return res
	}
	return d.appsPageWith(c, p, 200, appsData{})
}

// appsRule: every member reads the OAuth apps; api_keys.manage manages
// them (support staff never).
var appsRule = rule{back: appsPath, perm: members.PermAPIKeys, anyoneReads: true,
	ready:   func(d Deps) bool { return d.OAuth != nil },
	support: "Support staff have read-only access: OAuth apps cannot be created, rotated, deleted or disconnected.",
	denied:  "Managing OAuth apps needs the api_keys.manage permission; ask an owner or admin."}

func (d Deps) createApp(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, appsRule, true)
	if !ok {
		return res
	}
	form, err := url.ParseQuery(string(c.Body))
	if err != nil {
		return d.appsPageWith(c, p, 400, appsData{frame: frame{Error: formUnreadable}})
	}
	f := appForm{Name: strings.TrimSpace(form.Get("name")), Type: form.Get("type"), RedirectURIs: form.Get("redirect_uris"),
		Grants: form["grant"], Scopes: form["scope"]}
	var uris []string
	for _, l := range strings.Split(f.RedirectURIs, "\n") {
		if u := strings.TrimSpace(l); u != "" {
			uris = append(uris, u)
		}
	}
	app, secret, err := d.OAuth.CreateApp(c.Ctx, oauth.NewApp{Workspace: p.Workspace, Name: f.Name, Type: f.Type,
		Grants: f.Grants, Scopes: f.Scopes, RedirectURIs: uris, CreatedBy: p.MemberID})
	bad := func(status int, msg string) ingest.Result {
		return d.appsPageWith(c, p, status, appsData{frame: frame{Error: msg}, Form: f})
	}
	switch {
	case err == nil:
		return d.appsPageWith(c, p, 200, appsData{Secret: &appSecret{AppName: app.Name, ClientID: app.ClientID, Secret: secret}})
	case errors.Is(err, oauth.ErrPlan):
		return bad(403, "OAuth apps need the Pro or Enterprise plan; this workspace is on the "+p.Plan+" plan. Nothing was created.")
	case errors.Is(err, oauth.ErrTooMany):
		return bad(409, "This workspace already has the most OAuth apps it may have ("+strconv.Itoa(oauth.MaxAppsPerWorkspace)+"); delete one first. Nothing was created.")
	case errors.Is(err, oauth.ErrForbidden):
		return bad(403, "Managing OAuth apps needs the api_keys.manage permission; nothing was created.")
	case errors.Is(err, oauth.ErrInvalid):
		return bad(400, inWords(err, oauth.ErrInvalid)+" Nothing was created.")
	}
	return unavailable()
}

func (d Deps) rotateApp(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, appsRule, true)
	if !ok {
		return res
	}
	id := c.Params["id"]
	app, err := d.OAuth.App(c.Ctx, p.Workspace, id)
	if errors.Is(err, oauth.ErrNotFound) {
		return d.appsPageWith(c, p, 404, appsData{frame: frame{Error: "No OAuth app with this id in this workspace (deleted?)."}})
	}
	if err != nil {
		return unavailable()
	}
	secret, err := d.OAuth.RotateSecret(c.Ctx, p.Workspace, id)
	switch {
	case err == nil:
		return d.appsPageWith(c, p, 200, appsData{Secret: &appSecret{AppName: app.Name, ClientID: app.ClientID, Secret: secret, Rotated: true}})
	case errors.Is(err, oauth.ErrNotFound):
		return d.appsPageWith(c, p, 404, appsData{frame: frame{Error: "The app " + app.Name + " is public: it has no secret to rotate."}})
	}
	return unavailable()
}

func (d Deps) deleteApp(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, appsRule, true)
	if !ok {
		return res
	}
	err := d.OAuth.DeleteApp(c.Ctx, p.Workspace, c.Params["id"])
	switch {
	case err == nil:
		return redirect(appsPath)
	case errors.Is(err, oauth.ErrNotFound):
		return d.appsPageWith(c, p, 404, appsData{frame: frame{Error: "No OAuth app with this id in this workspace (already deleted?)."}})
	}
	return unavailable()
}
