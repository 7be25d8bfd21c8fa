package contacts_test

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

const formCT = "application/x-www-form-urlencoded"

func form(v map[string]string) string {
	q := url.Values{}
	for k, s := range v {
		q.Set(k, s)
	}
	return q.Encode()
}

// optIns returns the confirmation requests published for ws, oldest first
// per contact. They go to the opt-in topic only: none is on the contacts
// topic, and nothing else is on the opt-in topic.
func (e *env) optIns(t *testing.T, ws string) []schemas.OptInRequestedPayload {
	t.Helper()
	if n := len(ofType(e.topicEvents(t, schemas.TopicContacts, ws), schemas.TypeOptInRequested)); n != 0 {
		t.Fatalf("%d opt-in requests on the contacts topic", n)
	}
	reqs := e.topicEvents(t, schemas.TopicOptIn, ws)
	if other := len(reqs) - len(ofType(reqs, schemas.TypeOptInRequested)); other != 0 {
		t.Fatalf("%d other envelopes on the opt-in topic: %v", other, types(reqs))
	}
	var out []schemas.OptInRequestedPayload
	for _, env := range reqs {
		var p schemas.OptInRequestedPayload
		mustDecode(t, env.Payload, &p)
		out = append(out, p)
	}
	return out
}

// follow opens a confirmation link on this server (the routes were built
// with a placeholder site URL).
func (e *env) follow(t *testing.T, link string, asJSON bool) (int, []byte) {
	t.Helper()
	if !strings.HasPrefix(link, placeholderSite+"/confirm?token=") {
		t.Fatalf("unexpected confirmation link %q", link)
	}
	hdr := map[string]string{}
	if asJSON {
		hdr["Accept"] = "application/json"
	}
	return e.raw(t, "GET", strings.TrimPrefix(link, placeholderSite), "", "", "", hdr)
}

type confirmResp struct {
	Confirmed        bool                     `json:"confirmed"`
	AlreadyConfirmed bool                     `json:"alreadyConfirmed"`
	ContactConfirmed bool                     `json:"contactConfirmed"`
	Lists            []contacts.ConfirmedList `json:"lists"`
}

func TestHostedFormPage(t *testing.T) {
	e := start(t)
	ws, _ := e.ws(t, ingesttest.WorkspaceOpts{})
	l := e.list(t, ws, `News <b>&</b> "more"`, true)
	st, body := e.raw(t, "GET", "/forms/"+l.ID, "", "", "", nil)
	page := string(body)
	if st != 200 || !strings.Contains(page, `<form method="post" action="/forms/`+l.ID+`">`) ||
		!strings.Contains(page, `name="email"`) || !strings.Contains(page, "confirm your subscription") ||
		!strings.Contains(page, "News &lt;b&gt;&amp;&lt;/b&gt; &#34;more&#34;") || strings.Contains(page, "<b>&</b>") {
		t.Fatalf("form page: %d %s", st, page)
	}
	if st, _ := e.raw(t, "GET", "/forms/nope", "", "", "", nil); st != 404 {
		t.Fatalf("unknown form: %d", st)
	}
}

func TestFormSignupWithoutDoubleOptIn(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	l := e.list(t, ws, "Open list", false)

	st, body := e.raw(t, "POST", "/forms/"+l.ID, "", formCT, form(map[string]string{"email": " Fay@Example.com", "firstName": "Fay"}), nil)
	if st != 200 || !strings.Contains(string(body), "now subscribed") {
		t.Fatalf("sign-up: %d %s", st, body)
	}
	c := e.search(t, key, "fay@example.com")
	if c == nil || c.Status != "ACTIVE" || deref(c.Source) != "form" || deref(c.FirstName) != "Fay" ||
		len(c.Lists) != 1 || c.Lists[0].Status != "ACTIVE" {
		t.Fatalf("contact: %+v", c)
	}
	evs := e.events(t, ws)
	added := listPayloads(t, evs, schemas.TypeContactAddedToList, c.ID)
	if len(ofType(evs, schemas.TypeContactCreated)) != 1 || len(added) != 1 || added[0].Via != "form" ||
		len(ofType(evs, schemas.TypeContactJoinedList)) != 1 || len(ofType(evs, schemas.TypeOptInRequested)) != 0 {
		t.Fatalf("events: %v", types(evs))
	}

	// A repeat changes nothing, and a public form never edits a contact.
	st, body = e.raw(t, "POST", "/forms/"+l.ID, "", "application/json", `{"email":"fay@example.com","firstName":"Mallory"}`, nil)
	var fr struct {
		Success          bool   `json:"success"`
		ListID           string `json:"listId"`
		Status           string `json:"status"`
		ConfirmationSent bool   `json:"confirmationSent"`
	}
	mustDecode(t, body, &fr)
	if st != 200 || !fr.Success || fr.Status != "ACTIVE" || fr.ConfirmationSent || fr.ListID != l.ID {
		t.Fatalf("JSON repeat: %d %s", st, body)
	}
	if c := e.search(t, key, "fay@example.com"); deref(c.FirstName) != "Fay" {
		t.Fatalf("form changed the contact: %+v", c)
	}
	if n := len(e.events(t, ws)); n != len(evs) {
		t.Fatalf("repeat published %d more envelopes", n-len(evs))
	}

	// Bad input: HTML form with the error, JSON 400 with fields; the bot
	// trap field answers like success and stores nothing.
	st, body = e.raw(t, "POST", "/forms/"+l.ID, "", formCT, form(map[string]string{"email": "not an email"}), nil)
	if st != 400 || !strings.Contains(string(body), "valid email") || !strings.Contains(string(body), `value="not an email"`) {
		t.Fatalf("bad email (form): %d %s", st, body)
	}
	st, body = e.raw(t, "POST", "/forms/"+l.ID, "", "application/json", `{"email":"nope"}`, nil)
	var eb errBody
	mustDecode(t, body, &eb)
	if st != 400 || !reflect.DeepEqual(eb.Fields, []string{"email"}) {
		t.Fatalf("bad email (JSON): %d %s", st, body)
	}
	st, _ = e.raw(t, "POST", "/forms/"+l.ID, "", formCT, form(map[string]string{"email": "bot@example.com", "website": "http://spam"}), nil)
	if st != 200 || e.search(t, key, "bot@example.com") != nil {
		t.Fatalf("honeypot: %d", st)
	}
	if st, _ := e.raw(t, "POST", "/forms/nope", "", formCT, "email=x%40example.com", nil); st != 404 {
		t.Fatalf("unknown list: %d", st)
	}
	if n := e.contactsOf(t, ws); n != 1 {
		t.Fatalf("contacts: %d", n)
	}
}

func TestDoubleOptInConfirmsEveryPendingListAtOnce(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	a := e.list(t, ws, "Alpha", true)
	b := e.list(t, ws, "Beta", true)
	open := e.list(t, ws, "Open", false)

	for _, l := range []contacts.List{a, b, open} {
		st, body := e.raw(t, "POST", "/forms/"+l.ID, "", formCT, form(map[string]string{"email": "dora@example.com", "firstName": "Dora"}), nil)
		if st != 200 {
			t.Fatalf("sign-up %s: %d %s", l.Name, st, body)
		}
		if l.DoubleOptIn && !strings.Contains(string(body), "Check your inbox") {
			t.Fatalf("sign-up page: %s", body)
		}
	}
	c := e.search(t, key, "dora@example.com")
	status := map[string]string{}
	for _, m := range c.Lists {
		status[m.Name] = m.Status
	}
	if c.Status != "PENDING" || !reflect.DeepEqual(status, map[string]string{"Alpha": "PENDING", "Beta": "PENDING", "Open": "ACTIVE"}) {
		t.Fatalf("after sign-ups: %s %v", c.Status, status)
	}
	reqs := e.optIns(t, ws)
	if len(reqs) != 2 {
		t.Fatalf("confirmation requests: %d, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.ContactID != c.ID || r.Email != "dora@example.com" || r.FirstName != "Dora" || r.ExpiresAt.Before(time.Now().Add(6*24*time.Hour)) {
			t.Fatalf("request: %+v", r)
		}
	}

	// The click activates both pending lists at once.
	st, body := e.follow(t, reqs[0].ConfirmURL, false)
	if st != 200 || !strings.Contains(string(body), "Subscription confirmed") || !strings.Contains(string(body), "Alpha") || !strings.Contains(string(body), "Beta") {
		t.Fatalf("click: %d %s", st, body)
	}
	c = e.search(t, key, "dora@example.com")
	for _, m := range c.Lists {
		if m.Status != "ACTIVE" || (m.Name != "Open" && m.ConfirmedAt == nil) {
			t.Fatalf("after click: %+v", c.Lists)
		}
	}
	if c.Status != "ACTIVE" {
		t.Fatalf("contact after click: %s", c.Status)
	}
	evs := e.events(t, ws)
	conf := listPayloads(t, evs, schemas.TypeListSubscriptionConfirmed, c.ID)
	names := []string{}
	for _, p := range conf {
		if p.Email != "dora@example.com" || p.Status != "ACTIVE" {
			t.Fatalf("LIST_SUBSCRIPTION_CONFIRMED payload: %+v", p)
		}
		names = append(names, p.ListName)
	}
	if !sameSet(names, []string{"Alpha", "Beta"}) {
		t.Fatalf("LIST_SUBSCRIPTION_CONFIRMED lists: %v", names)
	}
	cc := ofType(evs, schemas.TypeContactConfirmed)
	var ccp schemas.ContactConfirmedPayload
	if len(cc) != 1 {
		t.Fatalf("CONTACT_CONFIRMED: %d", len(cc))
	}
	mustDecode(t, cc[0].Payload, &ccp)
	if ccp.ContactID != c.ID || ccp.Email != "dora@example.com" {
		t.Fatalf("CONTACT_CONFIRMED payload: %+v", ccp)
	}
	if n := len(listPayloads(t, evs, schemas.TypeContactJoinedList, c.ID)); n != 3 { // Open at sign-up, Alpha and Beta now
		t.Fatalf("joined-list events: %d", n)
	}

	// A second click (either link) changes nothing and says so.
	for _, r := range reqs {
		st, body = e.follow(t, r.ConfirmURL, true)
		var cr confirmResp
		mustDecode(t, body, &cr)
		if st != 200 || cr.Confirmed || !cr.AlreadyConfirmed || cr.ContactConfirmed || len(cr.Lists) != 0 {
			t.Fatalf("second click: %d %s", st, body)
		}
	}
	st, body = e.follow(t, reqs[1].ConfirmURL, false)
	if st != 200 || !strings.Contains(string(body), "already confirmed") {
		t.Fatalf("second click page: %d %s", st, body)
	}
	if n := len(e.events(t, ws)); n != len(evs) {
		t.Fatalf("second clicks published %d envelopes", n-len(evs))
	}

	// An ACTIVE contact joining another double opt-in list: the membership
	// waits, the contact stays ACTIVE; the click confirms the list only.
	d := e.list(t, ws, "Delta", true)
	if st, _ := e.raw(t, "POST", "/forms/"+d.ID, "", formCT, "email=dora%40example.com", nil); st != 200 {
		t.Fatal("sign-up to Delta failed")
	}
	if e.membership(t, key, "dora@example.com", d.ID) != "PENDING" || e.search(t, key, "dora@example.com").Status != "ACTIVE" {
		t.Fatal("Delta sign-up state")
	}
	reqs = e.optIns(t, ws)
	st, body = e.follow(t, reqs[len(reqs)-1].ConfirmURL, true)
	var cr confirmResp
	mustDecode(t, body, &cr)
	if st != 200 || !cr.Confirmed || cr.ContactConfirmed || len(cr.Lists) != 1 || cr.Lists[0].ID != d.ID {
		t.Fatalf("Delta click: %s", body)
	}
	evs = e.events(t, ws)
	if n := len(ofType(evs, schemas.TypeContactConfirmed)); n != 1 {
		t.Fatalf("CONTACT_CONFIRMED after Delta: %d", n)
	}
	if n := len(listPayloads(t, evs, schemas.TypeListSubscriptionConfirmed, c.ID)); n != 3 {
		t.Fatalf("LIST_SUBSCRIPTION_CONFIRMED after Delta: %d", n)
	}

	// UNSUBSCRIBED -> form on a double opt-in list -> PENDING again, and a
	// repeated sign-up while pending sends the email again.
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+a.ID+"/unsubscribe", key, map[string]any{"email": "dora@example.com"}, nil)
	for i := 0; i < 2; i++ {
		if st, _ := e.raw(t, "POST", "/forms/"+a.ID, "", formCT, "email=dora%40example.com", nil); st != 200 {
			t.Fatal("re-sign-up failed")
		}
	}
	if e.membership(t, key, "dora@example.com", a.ID) != "PENDING" {
		t.Fatal("re-sign-up did not leave PENDING")
	}
	if n := len(e.optIns(t, ws)); n != len(reqs)+2 {
		t.Fatalf("confirmation requests: %d, want %d", n, len(reqs)+2)
	}
}

func TestConfirmationLinksAreSignedAndExpire(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	l := e.list(t, ws, "Signed", true)
	if st, _ := e.raw(t, "POST", "/forms/"+l.ID, "", formCT, "email=sig%40example.com", nil); st != 200 {
		t.Fatal("sign-up failed")
	}
	c := e.search(t, key, "sig@example.com")
	good := e.optIns(t, ws)[0].ConfirmURL
	token := strings.TrimPrefix(good, placeholderSite+"/confirm?token=")

	forger, _ := contacts.NewSigner("another-secret-of-some-length", 0)
	forged, _ := forger.Sign(ws, c.ID)
	short, _ := contacts.NewSigner(testSecret, time.Nanosecond)
	expired, _ := short.Sign(ws, c.ID)
	time.Sleep(1100 * time.Millisecond)
	tampered := []byte(token)
	tampered[3] ^= 1
	for _, tc := range []struct {
		token  string
		status int
		code   string
	}{
		{"", 400, "invalid_token"},
		{"garbage", 400, "invalid_token"},
		{string(tampered), 400, "invalid_token"},
		{url.QueryEscape(forged), 400, "invalid_token"},
		{url.QueryEscape(expired), 410, "token_expired"},
	} {
		st, body := e.raw(t, "GET", "/confirm?token="+tc.token, "", "", "", map[string]string{"Accept": "application/json"})
		var eb errBody
		_ = json.Unmarshal(body, &eb)
		if st != tc.status || eb.Code != tc.code {
			t.Fatalf("token %.20q: %d %s", tc.token, st, body)
		}
	}
	if st, body := e.raw(t, "GET", "/confirm?token=garbage", "", "", "", nil); st != 400 || !strings.Contains(string(body), "not valid") {
		t.Fatalf("HTML invalid link: %d %s", st, body)
	}
	if e.membership(t, key, "sig@example.com", l.ID) != "PENDING" || e.search(t, key, "sig@example.com").Status != "PENDING" {
		t.Fatal("a bad link changed something")
	}
	if st, _ := e.follow(t, good, true); st != 200 || e.membership(t, key, "sig@example.com", l.ID) != "ACTIVE" {
		t.Fatal("the genuine link did not confirm")
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return len(a) == len(b)
}
