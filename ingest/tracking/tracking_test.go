package tracking_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
	"sendstream/ingest/events"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/ingesttest/browser"
	"sendstream/ingest/ratelimit"
	"sendstream/ingest/tracking"
	"sendstream/schemas"
)

func start(t *testing.T) *ingesttest.Harness {
	t.Helper()
	pg := stack.PG(t)
	store, err := events.NewStore(pg, events.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	routes := events.Routes(events.Deps{Store: store})
	routes = append(routes, tracking.Routes(tracking.Deps{
		Auth:    auth.NewCache(auth.NewStore(pg), auth.CacheConfig{TTL: time.Second}),
		Limiter: ratelimit.New(pg, ratelimit.Options{}),
	})...)
	return ingesttest.Start(t, routes...)
}

func TestScriptIsSmallAndServed(t *testing.T) {
	if n := len(tracking.Script); n >= 5*1024 {
		t.Fatalf("track.js is %d bytes minified, want < 5 KB", n)
	}
	if bytes.Contains(tracking.Script, []byte("/*")) || bytes.Contains(tracking.Script, []byte("\n  ")) {
		t.Fatal("track.js is served with comments or indentation")
	}
	h := start(t)
	resp, err := http.Get(h.URL + "/track.js")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || !bytes.Equal(b.Bytes(), tracking.Script) {
		t.Fatalf("GET /track.js: %d %s (%d bytes)", resp.StatusCode, resp.Header.Get("Content-Type"), b.Len())
	}
}

func TestMinify(t *testing.T) {
	src := "/*\n * doc\n */\n(function () {\n  // note\n  var a = \"x\"; /* keep? */\n\n  return a;\n})();\n"
	got := string(tracking.Minify([]byte(src)))
	want := "(function () {\nvar a = \"x\"; /* keep? */\nreturn a;\n})();\n"
	if got != want {
		t.Fatalf("Minify:\n%q\nwant\n%q", got, want)
	}
}

// sitePage serves the test pages on a loopback port: any path answers a
// page that loads track.js from siteURL with the token.
func sitePage(t *testing.T, siteURL, token string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Shop %s</title></head><body><h1>shop</h1>
<script>window.ICTrack = [["track", "queued.before.load"]];</script>
<script async src="%s/track.js" data-site-id="%s"></script>
<script>window.addEventListener("error", function (e) { (window.pageErrors = window.pageErrors || []).push(String(e.message)); });</script>
</body></html>`, r.URL.Path, siteURL, token)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// waitScript waits until track.js ran on the page.
func waitScript(t *testing.T, p *browser.Page) {
	t.Helper()
	for i := 0; i < 100; i++ {
		var ok bool
		p.Eval(t, `!!(window.ICTrack && window.ICTrack.v)`, &ok)
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("track.js did not load")
}

func TestTrackJSInHeadlessChromium(t *testing.T) {
	h := start(t)
	ws, _ := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	cs := contacts.NewStore(h.PG)
	defer cs.Close()
	ann, err := cs.Upsert(context.Background(), ws, contacts.UpsertInput{Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := h.Store.CreateTrackingToken(context.Background(), ws, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	port := sitePage(t, h.URL, token)
	br := browser.Launch(t)

	// An allowed origin (localhost): identify, goal, track, reset.
	p := br.NewPage(t)
	p.Navigate(t, fmt.Sprintf("http://localhost:%d/pricing?utm_source=news", port))
	waitScript(t, p)
	var statuses []int
	p.Eval(t, `(async () => {
		const r = [];
		r.push(await ICTrack.identify("  Ann@Example.com "));
		r.push(await ICTrack.goal("purchase", {value: 42.5, currency: "eur", externalId: "order-1"}));
		r.push(await ICTrack.track("viewed.pricing", {plan: "pro"}));
		r.push(await ICTrack.goal("signup", {email: "other@example.com"}));
		r.push(await ICTrack.reset());
		r.push(await ICTrack.track("anon.click"));
		r.push(await ICTrack.goal("purchase", {value: 42.5, externalId: "order-1"}));
		r.push(await ICTrack.push(["track", "pushed.after.load"]));
		return r;
	})()`, &statuses)
	if want := []int{1, 201, 201, 201, 1, 201, 200, 201}; fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", statuses, want)
	}
	// Bad calls never throw into the page; they answer a status.
	var bad []int
	p.Eval(t, `(async () => [await ICTrack.track(), await ICTrack.goal(), await ICTrack.goal("purchase"), await ICTrack.identify(5), await ICTrack.track("x", "not-object")])()`, &bad)
	if fmt.Sprint(bad) != "[0 0 400 0 201]" {
		t.Fatalf("bad calls answered %v", bad)
	}
	// A subdomain of an allowed domain passes.
	sub := br.NewPage(t)
	sub.Navigate(t, fmt.Sprintf("http://shop.localhost:%d/sub", port))
	waitScript(t, sub)
	var subStatus int
	sub.Eval(t, `ICTrack.track("sub.visit")`, &subStatus)
	if subStatus != 201 {
		t.Fatalf("subdomain: %d", subStatus)
	}
	// The next page knows nothing of the identify of the first.
	p.Navigate(t, fmt.Sprintf("http://localhost:%d/next", port))
	waitScript(t, p)
	var next int
	p.Eval(t, `ICTrack.track("next.page")`, &next)
	if next != 201 {
		t.Fatalf("next page: %d", next)
	}
	// An origin outside the allowed domains is refused with 403.
	evil := br.NewPage(t)
	evil.Navigate(t, fmt.Sprintf("http://127.0.0.1:%d/evil", port))
	waitScript(t, evil)
	var refused []int
	evil.Eval(t, `(async () => [await ICTrack.identify("ann@example.com"), await ICTrack.goal("purchase", {value: 1})])()`, &refused)
	if fmt.Sprint(refused) != "[1 403]" {
		t.Fatalf("other origin: %v", refused)
	}
	for _, pg := range []*browser.Page{p, sub, evil} {
		var errs []string
		pg.Eval(t, `window.pageErrors || []`, &errs)
		if ex := pg.Exceptions(); len(ex) > 0 || len(errs) > 0 {
			t.Fatalf("the page saw exceptions: %v %v", ex, errs)
		}
	}

	// What arrived.
	byName := map[string][]schemas.EventPayload{}
	envs := h.ConsumeUntil(t, schemas.TopicEvents, 10*time.Second, func(e []schemas.Envelope) bool { return len(e) >= 12 })
	for _, env := range envs {
		if env.Workspace != ws {
			continue
		}
		var pl schemas.EventPayload
		if err := json.Unmarshal(env.Payload, &pl); err != nil {
			t.Fatal(err)
		}
		byName[pl.Event] = append(byName[pl.Event], pl)
	}
	goal := byName["purchase"]
	if len(goal) < 1 || goal[0].Email != "ann@example.com" || goal[0].ContactID != ann.Contact.ID || goal[0].Value != "42.5" ||
		goal[0].Currency != "EUR" || goal[0].ExternalID != "order-1" || goal[0].GoalType != "purchase" || goal[0].Source != "public" {
		t.Fatalf("goal: %+v", goal)
	}
	if v := byName["viewed.pricing"]; len(v) != 1 || v[0].Email != "ann@example.com" || string(v[0].Properties) != `{"plan":"pro"}` {
		t.Fatalf("track after identify: %+v", v)
	}
	if v := byName["signup"]; len(v) != 1 || v[0].Email != "other@example.com" {
		t.Fatalf("goal with its own email: %+v", v)
	}
	for _, name := range []string{"anon.click", "next.page", "sub.visit", "queued.before.load", "x", "pushed.after.load"} {
		if v := byName[name]; len(v) == 0 || v[0].Email != "" || v[0].ContactID != "" {
			t.Fatalf("%s should be anonymous: %+v", name, v)
		}
	}
	if n := len(byName["queued.before.load"]); n != 3 { // one per page load that was allowed
		t.Fatalf("queued call recorded %d times, want 3", n)
	}

	// Page views: anonymous, from the allowed origins only.
	views := h.ConsumeUntil(t, schemas.TopicPageViews, 10*time.Second, func(e []schemas.Envelope) bool { return len(e) >= 3 })
	paths := map[string]schemas.PageViewPayload{}
	for _, env := range views {
		if env.Workspace != ws || env.Type != schemas.TypePageViewed {
			continue
		}
		var pv schemas.PageViewPayload
		if err := json.Unmarshal(env.Payload, &pv); err != nil {
			t.Fatal(err)
		}
		paths[pv.Path] = pv
	}
	if len(paths) != 3 {
		t.Fatalf("page views %v", paths)
	}
	pr := paths["/pricing"]
	if pr.Host != "localhost" || pr.Title != "Shop /pricing" || pr.UTMSource != "news" || pr.ScreenWidth == 0 || pr.UserAgent == "" {
		t.Fatalf("page view: %+v", pr)
	}
	if _, ok := paths["/evil"]; ok {
		t.Fatal("a page view from a refused origin was recorded")
	}
}

func TestPageviewBeaconRules(t *testing.T) {
	h := start(t)
	ws, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	_, token, err := h.Store.CreateTrackingToken(context.Background(), ws, []string{"shop.example"})
	if err != nil {
		t.Fatal(err)
	}
	post := func(origin, body string) (int, []byte) {
		req, _ := http.NewRequest("POST", h.URL+"/api/track/pageview", strings.NewReader(body))
		req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, b := h.DoRequest(req)
		return resp.StatusCode, b
	}
	ok := `{"s":"` + token + `","u":"https://www.shop.example/a/b?utm_campaign=spring#x","r":"https://news.test/x","t":"A","w":1280}`
	cases := []struct {
		origin, body string
		status       int
	}{
		{"https://www.shop.example", ok, 204},
		{"", ok, 204},
		{"https://other.test", ok, 403},
		{"https://www.shop.example", `{"s":"` + key + `","u":"https://shop.example/"}`, 401},
		{"https://www.shop.example", `{"s":"ss_track_nope","u":"https://shop.example/"}`, 401},
		{"https://www.shop.example", `{"s":"` + token + `","u":"javascript:alert(1)"}`, 400},
		{"https://www.shop.example", `[1]`, 400},
		{"https://www.shop.example", `{"s":"` + token + `","u":"https://shop.example/","t":"` + strings.Repeat("x", 9000) + `"}`, 413},
	}
	for i, c := range cases {
		if st, b := post(c.origin, c.body); st != c.status {
			t.Fatalf("case %d: %d %s, want %d", i, st, b, c.status)
		}
	}
	var got []schemas.PageViewPayload
	for _, env := range h.Consume(t, schemas.TopicPageViews) {
		if env.Workspace == ws {
			var pv schemas.PageViewPayload
			_ = json.Unmarshal(env.Payload, &pv)
			got = append(got, pv)
		}
	}
	if len(got) != 2 || got[0].Host != "www.shop.example" || got[0].Path != "/a/b" || got[0].UTMCampaign != "spring" || got[0].ReferrerHost != "news.test" || got[0].ScreenWidth != 1280 {
		t.Fatalf("page views: %+v", got)
	}
	_ = ingest.Result{}
}
