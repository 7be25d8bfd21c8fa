package dashboard

import (
	"errors"
	"slices"

	"sendstream/ingest"
	"sendstream/ingest/members"
	"sendstream/ingest/oauth"
)

const connectedPath = "/settings/connected-apps"

var connectedTmpl = pageTemplate("connected_apps.html")

// connectedAppRoutes are the connected-apps page: the workspace's apps
// with live connections (members' consents and client_credentials
// issuances) and Disconnect, which revokes every token of the app at once
// through oauth.Store.Disconnect, as POST /api/oauth-apps/{id}/disconnect.
//
//	GET  /settings/connected-apps                  list (any member; support staff too)
//	POST /settings/connected-apps/{id}/disconnect  {id} is the app; 303 back
func (d Deps) connectedAppRoutes() []ingest.Route {
	return []ingest.Route{
		pageRoute(connectedPath, d.connectedPage),
		formRoute(connectedPath+"/{id}/disconnect", d.disconnectApp),
	}
}

// connectedRule: every member reads the connected apps; api_keys.manage
// disconnects them (support staff never).
var connectedRule = rule{back: connectedPath, perm: members.PermAPIKeys, anyoneReads: true,
	ready:   func(d Deps) bool { return d.OAuth != nil },
	support: "Support staff have read-only access: apps cannot be disconnected.",
	denied:  "Disconnecting apps needs the api_keys.manage permission; ask an owner or admin."}

// connectedApp is one app and its live connections.
type connectedApp struct {
	ID, Name    string
	Connections []oauth.Connection
}

type connectedData struct {
	frame
	Apps      []connectedApp
	CanManage bool
	Support   bool
}

func (d Deps) connectedPageWith(c *ingest.Call, p ingest.Principal, status int, msg string) ingest.Result {
	conns, err := d.OAuth.Connections(c.Ctx, p.Workspace)
	if err != nil {
		return unavailable()
	}
	data := connectedData{frame: frameOf(p, "Connected apps")}
	data.Error = msg
	data.CanManage, data.Support = connectedRule.manages(p), isSupport(p)
	for _, cn := range conns { // newest connection first, so the app most recently connected leads
		i := slices.IndexFunc(data.Apps, func(a connectedApp) bool { return a.ID == cn.AppID })
		if i < 0 {
			data.Apps = append(data.Apps, connectedApp{ID: cn.AppID, Name: cn.AppName})
			i = len(data.Apps) - 1
		}
		data.Apps[i].Connections = append(data.Apps[i].Connections, cn)
	}
	return render(connectedTmpl, status, data)
}

func (d Deps) connectedPage(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, connectedRule, false)
	if !ok {
		return res
	}
	return d.connectedPageWith(c, p, 200, "")
}

func (d Deps) disconnectApp(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, connectedRule, true)
	if !ok {
		return res
	}
	id := c.Params["id"]
	if _, err := d.OAuth.App(c.Ctx, p.Workspace, id); errors.Is(err, oauth.ErrNotFound) {
		return d.connectedPageWith(c, p, 404, "No OAuth app with this id in this workspace (deleted?).")
	} else if err != nil {
		return unavailable()
	}
	if err := d.OAuth.Disconnect(c.Ctx, p.Workspace, id); err != nil {
		return unavailable()
	}
	return redirect(connectedPath)
}
