package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/deploy/stack"
	"sendstream/ingest/contacts"
	"sendstream/ingest/dashboard"
	"sendstream/ingest/oauth"
	"sendstream/ingest/transactional"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	chsink "sendstream/sinks/clickhouse"
	"sendstream/sinks/email/smtptest"
	"sendstream/stages/delivery"
	"sendstream/stages/messagelog"
	"sendstream/stages/requestlog"
)

// pages is one server with every dashboard page and the API routes they
// describe (contacts, transactional send and list, the OAuth token
// endpoint) over real HTTP, Postgres and ClickHouse, plus the requestlog
// and messagelog stages on the same broker, so API calls become rows the
// request log and the message-log chart read, and the delivery stage with
// an SMTP test server, so sent messages reach the sent status.
type pages struct {
	*env
	ch     driver.Conn
	oauth  *oauth.Store
	tstore *transactional.Store
	smtp   *smtptest.Server // where the delivery stage sends
}

func startPages(t *testing.T) *pages {
	t.Helper()
	pg := stack.PG(t)
	ch := stack.CH(t)
	cs := contacts.NewStore(pg)
	t.Cleanup(cs.Close)
	ost := oauth.NewStore(pg)
	ts := transactional.NewStore(pg)
	t.Cleanup(ts.Close)
	routes := oauth.Routes(oauth.Deps{Store: ost, SiteURL: "http://site.test"})
	const secret = "test secret for unsubscribe links"
	routes = append(routes, transactional.Routes(transactional.Deps{PG: pg, Contacts: cs, Secret: secret})...)
	e := serveDashboard(t, dashboard.Deps{OAuth: ost, ClickHouse: ch, Messages: ts}, cs, routes...)
	h := e.h
	stages, err := pipeline.SelectStages(requestlog.Name, messagelog.Name, messagelog.StatusName, delivery.Name)
	if err != nil {
		t.Fatal(err)
	}
	smtp := smtptest.Start(t, smtptest.Options{})
	settings := map[string]string{"site_url": h.URL, "secret": secret, "smtp_url": "smtp://" + smtp.Addr + "?tls=none"}
	pipelinetest.Start(context.Background(), t, "log stages", pipeline.RunConfig{
		Brokers: h.Brokers, Stages: stages, Resources: pipeline.Resources{Postgres: pg, ClickHouse: ch, Publisher: h.Publisher, Settings: settings},
		BackoffBase: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond, FlushInterval: 100 * time.Millisecond,
		MaxWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
		JoinGroupBackoff: 100 * time.Millisecond,
	})
	return &pages{env: e, ch: ch, oauth: ost, tstore: ts, smtp: smtp}
}

// waitRequests waits until the request log of ws in ClickHouse holds n
// rows (the requestlog stage writes them in batches) and returns them.
func (p *pages) waitRequests(ws string, n int) []chsink.RequestRow {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := chsink.FindRequests(context.Background(), p.ch, ws, chsink.RequestFilter{Limit: 1000})
		if err != nil {
			p.t.Fatal(err)
		}
		if len(rows) >= n {
			return rows
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("request log of %s: %d rows after 30 s, want %d", ws, len(rows), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiCall sends an API request with a key and returns the status.
func (p *pages) apiCall(method, path, key string, body any) int {
	p.t.Helper()
	st, _ := p.h.Do(method, path, key, body)
	return st
}
