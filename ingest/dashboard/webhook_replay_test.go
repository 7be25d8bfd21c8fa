package dashboard_test

import (
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"sendstream/schemas"
)

var deliveryRowRe = regexp.MustCompile(`<tr data-message-id="([^"]+)" data-outcome="([^"]+)">`)

// TestWebhookDeliveriesListedAndReplayed runs the real delivery stage and
// the delivery-log stages: a message published for an endpoint created on
// the page reaches a local https receiver, the endpoint's page lists the
// attempt from ClickHouse (outcome, HTTP 204, attempt 1), and its Replay
// button delivers the same message again (same webhook-id and body,
// attempt 2, signed with the endpoint's secret), which the page then lists
// as a replay. An unknown message replays nothing.
func TestWebhookDeliveriesListedAndReplayed(t *testing.T) {
	e := startHooks(t, true)
	ws, _, cookie := e.member("", "owner", "")
	target, got := receiver(t)
	id, secret := e.createEndpoint(cookie, target, "CONTACT_CREATED")

	msg := schemas.NewID()
	body := `{"id":"` + msg + `","event":"CONTACT_CREATED","timestamp":"2026-11-26T10:00:00.000Z","teamId":"` + ws + `","data":{"contactId":"c1","email":"a@example.com"}}`
	d := schemas.WebhookDelivery{MessageID: msg, Event: "CONTACT_CREATED", TargetKind: schemas.WebhookTargetEndpoint, TargetID: id,
		URL: target, Attempt: 1, FirstAt: time.Now().UTC().Truncate(time.Second), Body: []byte(body)}
	p, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	env := schemas.Envelope{ID: schemas.ChildID(msg+"/"+id, schemas.TypeWebhookDelivery, 1), Workspace: ws, Type: schemas.TypeWebhookDelivery,
		Key: schemas.WebhookDeliveryKey(ws, id, msg), OccurredAt: time.Now().UTC(), Payload: p, PayloadCompact: true}
	if err := e.h.Publisher.Publish(context.Background(), schemas.TopicWebhookDeliveries, env); err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	receive := func(attempt string) {
		t.Helper()
		select {
		case r := <-got:
			if string(r.body) != body || r.header.Get("webhook-id") != msg || r.header.Get("X-Webhook-Attempt") != attempt {
				t.Fatalf("delivery: webhook-id %q attempt %q body %s, want %s, %s and the message's body", r.header.Get("webhook-id"), r.header.Get("X-Webhook-Attempt"), r.body, msg, attempt)
			}
			if err := wh.Verify(r.body, r.header); err != nil {
				t.Errorf("attempt %s: Standard Webhooks verification with the secret the page showed: %v", attempt, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("attempt %s did not reach the receiver within 30 s", attempt)
		}
	}
	receive("1")

	// rows waits until the endpoint's page lists n attempts of msg.
	rows := func(n int) string {
		t.Helper()
		var page string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			resp, b := e.do("GET", "/settings/webhooks/"+id, cookie, nil, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("the endpoint's page: %d", resp.StatusCode)
			}
			page = b
			if len(deliveryRowRe.FindAllString(b, -1)) >= n {
				return b
			}
		}
		t.Fatalf("the endpoint's page lists %d attempts after 30 s, want %d\n%s", len(deliveryRowRe.FindAllString(page, -1)), n, page)
		return ""
	}
	page := rows(1)
	for _, want := range []string{`data-message-id="` + msg + `" data-outcome="ok"`, "HTTP 204", "<td>1</td>", "CONTACT_CREATED", target,
		`action="/settings/webhooks/` + id + `/replay"`, `name="message" value="` + msg + `"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the endpoint's page lacks %q", want)
		}
	}
	// A body that is not logged for this endpoint replays nothing.
	resp, b := e.do("POST", "/settings/webhooks/"+id+"/replay", cookie, url.Values{"message": {"no-such-message"}}, nil)
	if resp.StatusCode != 404 || !strings.Contains(b, "nothing was replayed") {
		t.Errorf("replaying an unknown message: %d, want 404 saying nothing was replayed", resp.StatusCode)
	}
	if resp, _ := e.do("POST", "/settings/webhooks/"+id+"/replay", cookie, url.Values{}, nil); resp.StatusCode != 400 {
		t.Errorf("replay without a message: %d, want 400", resp.StatusCode)
	}

	resp, _ = e.do("POST", "/settings/webhooks/"+id+"/replay", cookie, url.Values{"message": {msg}}, nil)
	if want := "/settings/webhooks/" + id + "?replayed=" + msg; resp.StatusCode != 303 || resp.Header.Get("Location") != want {
		t.Fatalf("replay: %d %q, want 303 %s", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	receive("2")
	page = rows(2)
	if !strings.Contains(page, "(replay)") || strings.Count(page, `data-message-id="`+msg+`" data-outcome="ok"`) != 2 {
		t.Errorf("after the replay the page does not list two ok attempts, one a replay")
	}
	if _, b := e.do("GET", "/settings/webhooks/"+id+"?replayed="+msg, cookie, nil, nil); !strings.Contains(b, "queued for delivery again") {
		t.Error("the page after the replay's redirect does not say it was queued")
	}
	if _, b := e.do("GET", "/settings/webhooks/"+id+"?replayed=Call+us+now", cookie, nil, nil); strings.Contains(b, "Call us now") {
		t.Error("the page names a message given in the URL that is not in its log")
	}
	select {
	case r := <-got:
		t.Errorf("an extra delivery arrived: attempt %s", r.header.Get("X-Webhook-Attempt"))
	case <-time.After(time.Second):
	}
}
