package transactional

import (
	"bytes"
	"context"
	"html/template"
	"net/url"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest"
	"sendstream/schemas"
	"sendstream/sinks/email"
)

// The unsubscribe page at the site root. Marketing messages link to
// {site}/unsubscribe/{token} (and name it in List-Unsubscribe): GET shows a
// confirmation page whose button POSTs back; a POST (the page's button or a
// mail client's RFC 8058 one-click "List-Unsubscribe=One-Click") suppresses
// the address for marketing and marks its contact UNSUBSCRIBED, which fires
// CONTACT_UNSUBSCRIBED. Repeating it is harmless. GET never changes anything, so link scanners that fetch
// links cannot unsubscribe anyone.

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}
button{font-size:1rem;padding:.6rem 1.2rem;border:0;border-radius:.3rem;background:#222;color:#fff;cursor:pointer}</style>
</head><body>
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{if .Action}}<form method="post" action="{{.Action}}"><input type="hidden" name="confirm" value="yes"><button type="submit">Unsubscribe</button></form>{{end}}
</body></html>
`))

type page struct {
	Title, Text, Action string
}

func htmlPage(status int, p page) ingest.Result {
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		return ingest.Fail(500, "internal_error", "Internal error")
	}
	return ingest.Result{Status: status, Raw: b.Bytes(), ContentType: "text/html; charset=utf-8",
		Headers: map[string]string{"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}}
}

var invalidLink = page{Title: "Link not valid", Text: "This unsubscribe link is not valid. Use the link from the most recent email you received."}

// unsubscribePage is GET /unsubscribe/{token}: the confirmation page.
func (a *api) unsubscribePage(c *ingest.Call) ingest.Result {
	tok := c.Params["token"]
	u, err := email.VerifyUnsubscribe(a.secret, tok)
	if err != nil {
		return htmlPage(400, invalidLink)
	}
	name, ok, err := a.store.WorkspaceName(c.Ctx, u.Workspace)
	if err != nil {
		return a.internal(err)
	}
	if !ok {
		return htmlPage(404, invalidLink)
	}
	return htmlPage(200, page{
		Title:  "Unsubscribe",
		Text:   "Stop marketing email from " + name + " to " + u.Email + "? You will still receive messages about your account and orders.",
		Action: "/unsubscribe/" + url.PathEscape(tok),
	})
}

// unsubscribe is POST /unsubscribe/{token}: the page's button and the RFC
// 8058 one-click POST (body List-Unsubscribe=One-Click). When it moves the
// contact to UNSUBSCRIBED it announces CONTACT_UNSUBSCRIBED
// (contact.unsubscribed.v1 on TopicContacts), written to the contacts outbox
// in the same transaction and published before the page is answered; a
// repeat changes nothing and announces nothing.
func (a *api) unsubscribe(c *ingest.Call) ingest.Result {
	u, err := email.VerifyUnsubscribe(a.secret, c.Params["token"])
	if err != nil {
		return htmlPage(400, invalidLink)
	}
	r, msgs, ids, err := a.applyUnsubscribe(c.Ctx, u.Workspace, u.Email, u.MessageID)
	if err != nil {
		return a.internal(err)
	}
	if !r.Found {
		return htmlPage(404, invalidLink)
	}
	res := htmlPage(200, page{Title: "You are unsubscribed", Text: u.Email + " will no longer receive marketing email from " + r.WorkspaceName + "."})
	if len(msgs) > 0 {
		// Published before answering; a failed publish answers 503 saying
		// the change was kept and the event will still be delivered (by
		// the contacts relay, from the outbox row).
		res.Publish, res.Stored = msgs, true
		if len(ids) == len(msgs) {
			res.Outboxed = true
			res.Published = func() { a.svc.contacts.Published(ids...) }
		}
	}
	return res
}

// applyUnsubscribe unsubscribes email in ws and returns the envelopes
// announcing it; with a contacts store they are written to its outbox in
// the unsubscribe's transaction, and their row ids returned too.
func (a *api) applyUnsubscribe(ctx context.Context, ws, addr, messageID string) (UnsubscribeResult, []ingest.Message, []int64, error) {
	announce := func(r UnsubscribeResult) []ingest.Message {
		if r.ContactID == "" {
			return nil
		}
		return []ingest.Message{{Topic: schemas.TopicContacts,
			Env: schemas.ContactUnsubscribed(ws, r.ContactID, addr, r.At, messageID)}}
	}
	if a.svc.contacts == nil {
		r, err := a.store.Unsubscribe(ctx, ws, addr, messageID)
		return r, announce(r), nil, err
	}
	var r UnsubscribeResult
	write := func(tx pgx.Tx) (err error) {
		r, err = a.store.UnsubscribeTx(ctx, tx, ws, addr, messageID)
		return err
	}
	msgs, ids, err := a.svc.contacts.InOutbox(ctx, write, func() []ingest.Message { return announce(r) })
	if err != nil {
		return UnsubscribeResult{}, nil, nil, err
	}
	return r, msgs, ids, nil
}
