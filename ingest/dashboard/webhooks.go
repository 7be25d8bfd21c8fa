package dashboard

import (
	"errors"
	"net/url"
	"slices"
	"strings"

	"sendstream/ingest"
	"sendstream/ingest/members"
	"sendstream/ingest/webhooks"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
)

// The webhook endpoints page (spec 6, the dashboard column of its table):
// endpoints registered by an owner or admin, https:// only, several event
// types each, signed with a Standard Webhooks secret shown once. This file
// lists, creates, enables, disables, rotates and deletes them; the
// endpoint's own page with its deliveries is webhook_deliveries.go.

const webhooksPath = "/settings/webhooks"

// disabledInDashboard is the reason (webhook.Endpoint.DisabledReason) of
// an endpoint a member disabled on this page.
const disabledInDashboard = "disabled in the dashboard"

var webhooksTmpl = pageTemplate("webhooks.html")

// webhookRoutes are the webhook pages' routes (Routes lists them).
func (d Deps) webhookRoutes() []ingest.Route {
	return []ingest.Route{
		pageRoute(webhooksPath, d.webhooksPage),
		formRoute(webhooksPath, d.createWebhook),
		formRoute(webhooksPath+"/{id}/enable", d.enableWebhook),
		formRoute(webhooksPath+"/{id}/disable", d.disableWebhook),
		formRoute(webhooksPath+"/{id}/rotate-secret", d.rotateWebhook),
		formRoute(webhooksPath+"/{id}/delete", d.deleteWebhook),
		pageRoute(webhooksPath+"/{id}", d.webhookPage),
		formRoute(webhooksPath+"/{id}/replay", d.replayWebhook),
	}
}

// webhooksData is what webhooks.html shows.
type webhooksData struct {
	frame
	Endpoints []webhook.Endpoint
	CanManage bool // the forms: owners and admins
	ReadOnly  bool // support staff: the list only
	Events    []eventBox
	Form      webhookForm
	Secret    *shownSecret // a new or rotated secret, shown once in the POST's answer
}

type eventBox struct {
	Name, Description string
	Checked           bool
}

type webhookForm struct {
	URL    string
	Events []string
}

// shownSecret is an endpoint's secret, in the answer of the POST that
// made it.
type shownSecret struct {
	ID, URL, Secret string
	Rotated         bool
}

// webhooksRule: webhooks.manage (owners and admins, spec 6, or a role
// granted it by name) manages the endpoints; support staff read them;
// other members are refused. The pages need Deps.Webhooks.
var webhooksRule = rule{back: webhooksPath, perm: members.PermWebhooks,
	ready:   func(d Deps) bool { return d.Webhooks != nil },
	support: "Support staff have read-only access: webhook endpoints cannot be changed or replayed.",
	denied:  "Webhook endpoints are managed by the workspace's owners and admins (or a role granted webhooks.manage); ask one of them."}

// webhooksPageWith lists the endpoints around data's form state; status is
// the answer's.
func (d Deps) webhooksPageWith(c *ingest.Call, p ingest.Principal, status int, data webhooksData) ingest.Result {
	manage := webhooksRule.manages(p)
	eps, err := d.Webhooks.Store().List(c.Ctx, p.Workspace)
	if err != nil {
		return unavailable()
	}
	data.frame = data.frame.titled(p, "Webhooks")
	data.Endpoints, data.CanManage, data.ReadOnly = eps, manage, !manage
	for _, ev := range schemas.WebhookEvents() {
		data.Events = append(data.Events, eventBox{Name: ev.Name, Description: ev.Description, Checked: slices.Contains(data.Form.Events, ev.Name)})
	}
	return render(webhooksTmpl, status, data)
}

func (d Deps) webhooksPage(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, webhooksRule, false)
	if !ok {
		return res
	}
	return d.webhooksPageWith(c, p, 200, webhooksData{})
}

func (d Deps) createWebhook(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, webhooksRule, true)
	if !ok {
		return res
	}
	form, err := url.ParseQuery(string(c.Body))
	if err != nil {
		return d.webhooksPageWith(c, p, 400, webhooksData{frame: frame{Error: formUnreadable}})
	}
	f := webhookForm{URL: strings.TrimSpace(form.Get("url")), Events: form["event"]}
	ep, secret, err := d.Webhooks.Create(c.Ctx, p.Workspace, f.URL, f.Events, "")
	var ie *webhooks.InputError
	switch {
	case errors.As(err, &ie):
		return d.webhooksPageWith(c, p, 400, webhooksData{frame: frame{Error: inputMessage(ie)}, Form: f})
	case err != nil:
		return unavailable()
	}
	return d.webhooksPageWith(c, p, 200, webhooksData{Secret: &shownSecret{ID: ep.ID, URL: ep.URL, Secret: secret}})
}

// inputMessage says on the page what to fix in the create form.
func inputMessage(ie *webhooks.InputError) string {
	field := map[string]string{"url": "URL", "events": "Events"}[ie.Field]
	if field == "" {
		field = ie.Field
	}
	msg := ie.Err.Error()
	msg = strings.ReplaceAll(msg, "targetUrl's host", "the host")
	msg = strings.ReplaceAll(msg, "targetUrl", "the URL")
	return field + ": " + msg + "."
}

func (d Deps) enableWebhook(c *ingest.Call) ingest.Result {
	return d.changeWebhook(c, func(p ingest.Principal, id string) error {
		_, err := d.Webhooks.Store().Enable(c.Ctx, p.Workspace, id)
		return err
	})
}

func (d Deps) disableWebhook(c *ingest.Call) ingest.Result {
	return d.changeWebhook(c, func(p ingest.Principal, id string) error {
		_, err := d.Webhooks.Store().Disable(c.Ctx, p.Workspace, id, disabledInDashboard)
		return err
	})
}

func (d Deps) deleteWebhook(c *ingest.Call) ingest.Result {
	return d.changeWebhook(c, func(p ingest.Principal, id string) error {
		return d.Webhooks.Store().Delete(c.Ctx, p.Workspace, id)
	})
}

// changeWebhook runs a change of one endpoint and answers 303 to the list
// (Post/Redirect/Get), or the list with a 404 when the workspace has no
// such endpoint.
func (d Deps) changeWebhook(c *ingest.Call, change func(p ingest.Principal, id string) error) ingest.Result {
	p, res, ok := d.allowed(c, webhooksRule, true)
	if !ok {
		return res
	}
	err := change(p, c.Params["id"])
	switch {
	case err == nil:
		return redirect(webhooksPath)
	case errors.Is(err, webhook.ErrEndpointNotFound):
		return d.webhooksPageWith(c, p, 404, webhooksData{frame: frame{Error: "No such webhook endpoint in this workspace (deleted?)."}})
	}
	return unavailable()
}

func (d Deps) rotateWebhook(c *ingest.Call) ingest.Result {
	p, res, ok := d.allowed(c, webhooksRule, true)
	if !ok {
		return res
	}
	id := c.Params["id"]
	secret, err := d.Webhooks.RotateSecret(c.Ctx, p.Workspace, id)
	switch {
	case errors.Is(err, webhook.ErrEndpointNotFound):
		return d.webhooksPageWith(c, p, 404, webhooksData{frame: frame{Error: "No such webhook endpoint in this workspace (deleted?)."}})
	case err != nil:
		return unavailable()
	}
	shown := &shownSecret{ID: id, Secret: secret, Rotated: true}
	if ep, err := d.endpoint(c, p, id); err == nil {
		shown.URL = ep.URL
	}
	return d.webhooksPageWith(c, p, 200, webhooksData{Secret: shown})
}

// endpoint returns endpoint id of p's workspace;
// webhook.ErrEndpointNotFound when it has none.
func (d Deps) endpoint(c *ingest.Call, p ingest.Principal, id string) (webhook.Endpoint, error) {
	eps, err := d.Webhooks.Store().List(c.Ctx, p.Workspace)
	if err != nil {
		return webhook.Endpoint{}, err
	}
	for _, e := range eps {
		if e.ID == id {
			return e, nil
		}
	}
	return webhook.Endpoint{}, webhook.ErrEndpointNotFound
}
