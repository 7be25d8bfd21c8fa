package dashboard

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"sendstream/ingest"
	"sendstream/sinks/webhook"
	whlog "sendstream/sinks/webhooklog"
)

// One webhook endpoint's page: its recent deliveries from the webhook
// delivery log in ClickHouse (sinks/webhooklog, which `admin webhook
// deliveries` reads too) with their outcome, and a Replay button per
// message that publishes it again to this endpoint with the same
// webhook-id (`admin webhook replay --message`, limited to this endpoint).

// recentDeliveries is how many attempts the endpoint's page lists, newest
// first.
const recentDeliveries = 50

var webhookTmpl = pageTemplate("webhook.html")

// webhookData is what webhook.html shows.
type webhookData struct {
	frame
	Endpoint   webhook.Endpoint
	Deliveries []deliveryRow
	NoLog      bool // this process has no ClickHouse
	CanReplay  bool // owners and admins; support staff see no button
	Replayed   string
}

// deliveryRow is one attempt; First marks the newest attempt of its
// message, the row that carries the message's Replay button.
type deliveryRow struct {
	whlog.Delivery
	First bool
}

func webhookPath(id string) string { return webhooksPath + "/" + url.PathEscape(id) }

func (d Deps) webhookPage(c *ingest.Call) ingest.Result {
	id := c.Params["id"]
	p, res, ok := d.allowed(c, webhooksRule.at(webhookPath(id)), false)
	if !ok {
		return res
	}
	return d.webhookPageWith(c, p, id, 200, webhookData{Replayed: c.Query("replayed")})
}

// webhookPageWith shows endpoint id with its deliveries around data;
// status is the answer's. An endpoint the workspace lacks is a 404 page.
func (d Deps) webhookPageWith(c *ingest.Call, p ingest.Principal, id string, status int, data webhookData) ingest.Result {
	ep, err := d.endpoint(c, p, id)
	switch {
	case errors.Is(err, webhook.ErrEndpointNotFound):
		f := frame{Error: "No such webhook endpoint in this workspace (deleted?)."}
		return render(webhookTmpl, 404, webhookData{frame: f.titled(p, "Webhook endpoint")})
	case err != nil:
		return unavailable()
	}
	data.frame = data.frame.titled(p, "Webhook endpoint")
	data.Endpoint = ep
	data.CanReplay = webhooksRule.manages(p)
	if d.ClickHouse == nil {
		data.NoLog, data.Replayed = true, ""
		return render(webhookTmpl, status, data)
	}
	ds, err := whlog.Deliveries(c.Ctx, d.ClickHouse, whlog.Filter{Workspace: p.Workspace, TargetID: id, Limit: recentDeliveries})
	if err != nil {
		return unavailable()
	}
	seen := map[string]bool{}
	for _, dl := range ds {
		data.Deliveries = append(data.Deliveries, deliveryRow{Delivery: dl, First: !seen[dl.MessageID]})
		seen[dl.MessageID] = true
	}
	if !seen[data.Replayed] {
		data.Replayed = "" // only a message of this endpoint's log is named
	}
	return render(webhookTmpl, status, data)
}

// replayWebhook publishes one logged message again to this endpoint (not
// to the other targets it went to) with the same webhook-id and body,
// then answers 303 back to the endpoint's page, which says so. The
// delivery stage skips it while the endpoint is disabled.
func (d Deps) replayWebhook(c *ingest.Call) ingest.Result {
	id := c.Params["id"]
	p, res, ok := d.allowed(c, webhooksRule.at(webhookPath(id)), true)
	if !ok {
		return res
	}
	form, err := url.ParseQuery(string(c.Body))
	msg := strings.TrimSpace(form.Get("message"))
	if err != nil || msg == "" {
		return d.webhookPageWith(c, p, id, 400, webhookData{frame: frame{Error: "Choose a message to replay (the Replay button of a delivery)."}})
	}
	if _, err := d.endpoint(c, p, id); err != nil {
		return d.webhookPageWith(c, p, id, 404, webhookData{})
	}
	if d.ClickHouse == nil || d.Publisher == nil {
		return unavailable()
	}
	logged, err := whlog.MessageTargets(c.Ctx, d.ClickHouse, p.Workspace, msg)
	if err != nil {
		return unavailable()
	}
	var mine []whlog.Logged
	for _, l := range logged {
		if l.Delivery.TargetID == id {
			mine = append(mine, l)
		}
	}
	if len(mine) == 0 {
		return d.webhookPageWith(c, p, id, 404, webhookData{frame: frame{Error: "The delivery log has no message " + msg + " for this endpoint; nothing was replayed."}})
	}
	if _, err := whlog.Replay(c.Ctx, d.Publisher, mine, time.Now()); err != nil {
		return unavailable()
	}
	return redirect(webhookPath(id) + "?replayed=" + url.QueryEscape(msg))
}
