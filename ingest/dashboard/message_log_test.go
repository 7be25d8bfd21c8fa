package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
)

var (
	messageRowRe = regexp.MustCompile(`<tr data-message-id="([^"]+)" data-status="([a-z]+)">`)
	chartDataRe  = regexp.MustCompile(`<script type="application/json" id="messages-chart-data">([^<]*)</script>`)
)

func shownMessages(body string) []string {
	var ids []string
	for _, m := range messageRowRe.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestMessageLogPage sends two messages through POST /v1/transactional/send
// (one inline, one from a template), waits for the delivery stage to hand
// them to SMTP, and finds them on the page as sent, newest first, filtered
// by recipient and status; the chart counts them queued and sent today
// once the messagelog stage has written their status rows.
func TestMessageLogPage(t *testing.T) {
	p := startPages(t)
	ws, key := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	_, otherKey := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	tpl, err := p.tstore.CreateTemplate(context.Background(), ws, transactional.Template{Name: "receipt", Subject: "Your receipt {{ order.id }}", HTML: "<p>{{ order.id }}</p>"})
	if err != nil {
		t.Fatal(err)
	}
	send := func(key string, body map[string]any) string {
		t.Helper()
		st, raw := p.h.Do("POST", "/api/v1/transactional/send", key, body)
		var ans struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &ans); st != 201 || err != nil || ans.ID == "" {
			t.Fatalf("send: %d %s", st, raw)
		}
		return ans.ID
	}
	inline := send(key, map[string]any{"to": "Ada@Example.com", "subject": "inline", "htmlContent": "<p>hi</p>", "externalId": "welcome-1"})
	templated := send(key, map[string]any{"to": "bob@example.com", "templateId": tpl, "data": map[string]any{"order": map[string]any{"id": 7}}})
	foreign := send(otherKey, map[string]any{"to": "ada@example.com", "subject": "x", "htmlContent": "x"})

	_, _, cookie := p.member(ws, "member", "")
	var resp *http.Response
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, body = p.do("GET", "/logs/messages?status=sent", cookie, nil, nil)
		if len(shownMessages(body)) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the messages are not sent after 30 s: %d shown as sent", len(shownMessages(body)))
		}
	}
	resp, body = p.do("GET", "/logs/messages", cookie, nil, nil)
	if got := shownMessages(body); resp.StatusCode != 200 || !slices.Equal(got, []string{templated, inline}) {
		t.Fatalf("message log: %d, rows %v, want newest first %v", resp.StatusCode, got, []string{templated, inline})
	}
	// Sent messages show the subject they went out with, rendered.
	for _, s := range []string{"ada@example.com", "bob@example.com", "<td>Your receipt 7</td>", "<td>inline</td>", "welcome-1", `data-status="sent"`} {
		if !strings.Contains(body, s) {
			t.Errorf("the message log lacks %q", s)
		}
	}
	if strings.Contains(body, "{{ order.id }}") || strings.Contains(body, "not yet rendered") {
		t.Error("the message log shows a sent message's subject unrendered")
	}
	// So do the message lookups of the API.
	for id, want := range map[string]string{templated: "Your receipt 7", inline: "inline"} {
		st, raw := p.h.Do("GET", "/api/v1/transactional/"+id+"/status", key, nil)
		var ans struct {
			Subject *string `json:"subject"`
		}
		if err := json.Unmarshal(raw, &ans); st != 200 || err != nil || ans.Subject == nil || *ans.Subject != want {
			t.Errorf("status of %s: %d %s, want subject %q", id, st, raw, want)
		}
	}
	if strings.Contains(body, foreign) {
		t.Error("the message log shows another workspace's message")
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"?to=ADA%40example.com", []string{inline}},
		{"?status=sent&to=bob%40example.com", []string{templated}},
		{"?status=queued", nil},
		{"?status=delivered", nil},
	} {
		resp, body := p.do("GET", "/logs/messages"+c.query, cookie, nil, nil)
		if got := shownMessages(body); resp.StatusCode != 200 || !slices.Equal(got, c.want) {
			t.Errorf("GET /logs/messages%s: %d, rows %v, want %v", c.query, resp.StatusCode, got, c.want)
		}
	}
	for _, c := range []struct{ query, says string }{{"?status=lost", "status must be one of"}, {"?to=nobody", "recipient must be an email address"}} {
		resp, body := p.do("GET", "/logs/messages"+c.query, cookie, nil, nil)
		if resp.StatusCode != 400 || !strings.Contains(body, c.says) || len(shownMessages(body)) != 0 {
			t.Errorf("GET /logs/messages%s: %d, want 400 saying %q without rows", c.query, resp.StatusCode, c.says)
		}
	}
	_, _, support := p.member(ws, "support", "")
	if resp, body := p.do("GET", "/logs/messages", support, nil, nil); resp.StatusCode != 200 || len(shownMessages(body)) != 2 {
		t.Errorf("support staff: %d, want 200 with both messages", resp.StatusCode)
	}

	// The chart: both messages queued today, once the messagelog stage has
	// written their status changes to ClickHouse.
	today := time.Now().UTC().Truncate(24 * time.Hour).Unix()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := p.do("GET", "/logs/messages", cookie, nil, nil)
		var cd struct {
			Days   []int64            `json:"days"`
			Series map[string][]int64 `json:"series"`
		}
		if m := chartDataRe.FindStringSubmatch(body); m != nil {
			if err := json.Unmarshal([]byte(m[1]), &cd); err != nil {
				t.Fatalf("chart data %q: %v", m[1], err)
			}
		}
		if len(cd.Days) == 14 && cd.Days[13] == today && len(cd.Series["queued"]) == 14 && cd.Series["queued"][13] == 2 && cd.Series["sent"][13] == 2 {
			if !strings.Contains(body, "uPlot.iife.min.js") || !strings.Contains(body, "messages-chart.js") {
				t.Error("the page has chart data but does not load uPlot and the chart script")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chart after 30 s: days %v queued %v sent %v, want 14 days ending today with 2 queued and 2 sent today", cd.Days, cd.Series["queued"], cd.Series["sent"])
		}
		time.Sleep(200 * time.Millisecond)
	}
}
