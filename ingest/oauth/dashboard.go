package oauth

import (
	"context"
	"errors"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/members"
)

// DashboardRoutes are the dashboard's internal JSON routes on the signed-in
// member's workspace (session only; API keys are refused, spec 1 fact 3):
//
//	GET    /api/oauth-apps                     list (any member, support staff too)
//	POST   /api/oauth-apps                     create → app and clientSecret (shown once)
//	POST   /api/oauth-apps/{id}/rotate-secret  → clientSecret
//	POST   /api/oauth-apps/{id}/disconnect     revoke every token of the app
//	DELETE /api/oauth-apps/{id}                revoke its connections, then delete
//
// Writes need the API-keys permission (members.Can); support staff are
// refused with 403 whatever their permissions.
func DashboardRoutes(d Deps) []ingest.Route {
	return []ingest.Route{
		{Method: "GET", Path: "/api/oauth-apps", Credential: ingest.CredSession, Handle: d.listApps},
		{Method: "POST", Path: "/api/oauth-apps", Credential: ingest.CredSession, Handle: d.createApp},
		{Method: "POST", Path: "/api/oauth-apps/{id}/rotate-secret", Credential: ingest.CredSession, Handle: d.write(d.rotate)},
		{Method: "POST", Path: "/api/oauth-apps/{id}/disconnect", Credential: ingest.CredSession, Handle: d.write(d.disconnect)},
		{Method: "DELETE", Path: "/api/oauth-apps/{id}", Credential: ingest.CredSession, Handle: d.write(d.deleteApp)},
	}
}

func timeout(c *ingest.Call) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Ctx, 10*time.Second)
}

// mayWrite refuses members who may not manage apps.
func mayWrite(c *ingest.Call) (ingest.Result, bool) {
	if !members.Can(members.FromPrincipal(c.Principal), members.PermAPIKeys) {
		return ingest.Fail(403, "forbidden", ErrForbidden.Error()), false
	}
	return ingest.Result{}, true
}

func (d Deps) write(h func(c *ingest.Call) ingest.Result) func(c *ingest.Call) ingest.Result {
	return func(c *ingest.Call) ingest.Result {
		if res, ok := mayWrite(c); !ok {
			return res
		}
		return h(c)
	}
}

func (d Deps) listApps(c *ingest.Call) ingest.Result {
	ctx, cancel := timeout(c)
	defer cancel()
	apps, err := d.Store.Apps(ctx, c.Principal.Workspace)
	if err != nil {
		return ingest.Fail(503, "unavailable", "Listing apps failed; retry later")
	}
	if apps == nil {
		apps = []App{}
	}
	return ingest.OK(200, map[string]any{"apps": apps})
}

type createRequest struct {
	Name         string   `json:"name"`
	Type         string   `json:"type"`
	Grants       []string `json:"grants"`
	Scopes       []string `json:"scopes"`
	RedirectURIs []string `json:"redirectUris"`
}

func (d Deps) createApp(c *ingest.Call) ingest.Result {
	if res, ok := mayWrite(c); !ok {
		return res
	}
	var req createRequest
	if err := ingest.DecodeJSON(c.Body, &req); err != nil {
		return ingest.Fail(400, "invalid_json", err.Error())
	}
	ctx, cancel := timeout(c)
	defer cancel()
	app, secret, err := d.Store.CreateApp(ctx, NewApp{Workspace: c.Principal.Workspace, Name: req.Name, Type: req.Type,
		Grants: req.Grants, Scopes: req.Scopes, RedirectURIs: req.RedirectURIs, CreatedBy: c.Principal.MemberID})
	switch {
	case err == nil:
		return ingest.OK(201, map[string]any{"app": app, "clientSecret": secret})
	case errors.Is(err, ErrPlan), errors.Is(err, ErrForbidden):
		return ingest.Fail(403, "forbidden", err.Error())
	case errors.Is(err, ErrTooMany):
		return ingest.Fail(409, "app_limit_reached", err.Error())
	case errors.Is(err, ErrInvalid):
		return ingest.Fail(400, "validation_error", err.Error())
	case errors.Is(err, auth.ErrNotFound):
		return ingest.Fail(404, "not_found", err.Error())
	}
	return ingest.Fail(503, "unavailable", "Creating the app failed; nothing was done, retry later")
}

func (d Deps) rotate(c *ingest.Call) ingest.Result {
	ctx, cancel := timeout(c)
	defer cancel()
	secret, err := d.Store.RotateSecret(ctx, c.Principal.Workspace, c.Params["id"])
	if errors.Is(err, ErrNotFound) {
		return ingest.Fail(404, "not_found", "No confidential OAuth app with this id in this workspace")
	}
	if err != nil {
		return ingest.Fail(503, "unavailable", "Rotating failed; the old secret still works, retry later")
	}
	return ingest.OK(200, map[string]string{"id": c.Params["id"], "clientSecret": secret})
}

func (d Deps) disconnect(c *ingest.Call) ingest.Result {
	ctx, cancel := timeout(c)
	defer cancel()
	if _, err := d.Store.App(ctx, c.Principal.Workspace, c.Params["id"]); errors.Is(err, ErrNotFound) {
		return ingest.Fail(404, "not_found", "No OAuth app with this id in this workspace")
	}
	if err := d.Store.Disconnect(ctx, c.Principal.Workspace, c.Params["id"]); err != nil {
		return ingest.Fail(503, "unavailable", "Disconnecting failed; retry later")
	}
	return ingest.OK(200, map[string]any{"id": c.Params["id"], "disconnected": true})
}

func (d Deps) deleteApp(c *ingest.Call) ingest.Result {
	ctx, cancel := timeout(c)
	defer cancel()
	err := d.Store.DeleteApp(ctx, c.Principal.Workspace, c.Params["id"])
	if errors.Is(err, ErrNotFound) {
		return ingest.Fail(404, "not_found", "No OAuth app with this id in this workspace")
	}
	if err != nil {
		return ingest.Fail(503, "unavailable", "Deleting failed; retry later")
	}
	return ingest.OK(200, map[string]any{"id": c.Params["id"], "deleted": true})
}
