package transactional_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS SignatureVersion 1
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/schemas"
)

// TestGenericProviderReports: sent → delivered → bounced/complained per
// spec 3.1, suppression, EMAIL_* events with the spec 6 payload, ClickHouse
// rows, idempotent repeats, and workspace isolation.
func TestGenericProviderReports(t *testing.T) {
	e := newEnv(t, envOpts{})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	_, otherKey := e.workspace(ingesttest.WorkspaceOpts{})
	e.contact(ws, "bounce@example.test", contacts.Fields{})
	sendOne := func(to, ext string) string {
		t.Helper()
		st, ans := e.send(key, map[string]any{"to": to, "subject": "s", "htmlContent": "<p>h</p>", "externalId": ext})
		if st != 201 {
			t.Fatal(st, ans)
		}
		id := ans["id"].(string)
		e.waitStatus(key, id, "sent")
		return id
	}
	report := func(k string, reports ...map[string]any) (int, []map[string]any) {
		t.Helper()
		st, ans := e.call("POST", "/api/providers/reports", k, map[string]any{"reports": reports})
		var out []map[string]any
		if rs, ok := ans["results"].([]any); ok {
			for _, r := range rs {
				out = append(out, r.(map[string]any))
			}
		}
		if st != 200 {
			t.Logf("report answer: %d %v", st, ans)
		}
		return st, out
	}
	a := sendOne("deliver@example.test", "r-a")
	b := sendOne("bounce@example.test", "r-b")
	c := sendOne("complain@example.test", "r-c")
	var rfcC string
	_ = e.pg.QueryRow(context.Background(), "SELECT rfc_message_id FROM transactional_messages WHERE id = $1", c).Scan(&rfcC)

	// Another workspace's key cannot touch these messages.
	if st, res := report(otherKey, map[string]any{"type": "delivered", "messageId": a}); st != 200 || res[0]["found"] != false {
		t.Errorf("foreign report: %d %v", st, res)
	}
	bounceAt := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second).Format(time.RFC3339)
	st, res := report(key,
		map[string]any{"type": "delivered", "messageId": a},
		map[string]any{"type": "delivered", "messageId": "ext:r-b"},
		map[string]any{"type": "bounced", "messageId": "ext:r-b", "bounceType": "hard", "reason": "550 5.1.1 user unknown", "occurredAt": bounceAt},
		map[string]any{"type": "complained", "messageId": "<" + rfcC + ">", "complaintType": "abuse"},
		map[string]any{"type": "delivered", "messageId": "no-such-message"},
		// the id part of the Message-ID is ours, the domain is not
		map[string]any{"type": "delivered", "messageId": "<" + a + "@elsewhere.example>"},
	)
	if st != 200 || len(res) != 6 {
		t.Fatalf("reports: %d %v", st, res)
	}
	wantStatus := []string{"delivered", "delivered", "bounced", "complained"}
	for i, w := range wantStatus {
		if res[i]["found"] != true || res[i]["applied"] != true || res[i]["status"] != w {
			t.Errorf("report %d: %v, want applied %s", i, res[i], w)
		}
	}
	for _, r := range res[4:] {
		if r["found"] != false || r["status"] != nil {
			t.Errorf("unknown message: %v", r)
		}
	}
	sa := e.waitStatus(key, a, "delivered")
	if sa["deliveredAt"] == nil {
		t.Errorf("deliveredAt: %v", sa)
	}
	sb := e.waitStatus(key, b, "bounced")
	if bn, _ := sb["bounce"].(map[string]any); bn["type"] != "hard" || bn["reason"] != "550 5.1.1 user unknown" {
		t.Errorf("bounce: %v", sb["bounce"])
	}
	evs := sb["events"].([]any)
	if len(evs) != 4 || evs[3].(map[string]any)["status"] != "bounced" {
		t.Errorf("events of the bounced message: %v", evs)
	}
	e.waitStatus(key, c, "complained")

	// A delivery report after a bounce, and repeats, change nothing.
	st, res = report(key, map[string]any{"type": "delivered", "messageId": b}, map[string]any{"type": "bounced", "messageId": b, "reason": "again"},
		map[string]any{"type": "complained", "messageId": c})
	if st != 200 || res[0]["applied"] != false || res[0]["status"] != "bounced" || res[1]["applied"] != false || res[2]["applied"] != false {
		t.Errorf("late and repeated reports: %v", res)
	}
	// Events: one each, spec 6 payload for EMAIL_BOUNCED.
	bounced := e.waitEnvelopes(schemas.TopicWebhooks, schemas.TypeWebhookEmailBounced, ws, 1)
	if len(bounced) != 1 {
		t.Fatalf("%d EMAIL_BOUNCED", len(bounced))
	}
	var bd map[string]any
	_ = json.Unmarshal(bounced[0].Payload, &bd)
	for k, v := range map[string]any{"email": "bounce@example.test", "messageId": b, "provider": "generic", "type": "hard", "reason": "550 5.1.1 user unknown", "occurredAt": bounceAt} {
		if bd[k] != v {
			t.Errorf("EMAIL_BOUNCED %s = %v, want %v", k, bd[k], v)
		}
	}
	if n := len(e.envelopes(schemas.TopicWebhooks, schemas.TypeWebhookEmailDelivered, ws)); n != 2 {
		t.Errorf("%d EMAIL_DELIVERED, want 2", n)
	}
	if n := len(e.envelopes(schemas.TopicWebhooks, schemas.TypeWebhookEmailComplained, ws)); n != 1 {
		t.Errorf("%d EMAIL_COMPLAINED, want 1", n)
	}
	// Suppression list and contact status.
	if s := contactStatus(t, e, ws, "bounce@example.test"); s != "BOUNCED" {
		t.Errorf("bounced contact: %s", s)
	}
	for _, to := range []string{"bounce@example.test", "complain@example.test"} {
		if st, ans := e.send(key, map[string]any{"to": to, "subject": "s", "htmlContent": "h"}); st != 422 || ans["code"] != "RECIPIENT_SUPPRESSED" {
			t.Errorf("send to %s after the report: %d %v", to, st, ans)
		}
	}
	// A soft bounce does not suppress.
	d := sendOne("soft@example.test", "r-d")
	if _, res := report(key, map[string]any{"type": "bounced", "messageId": d, "bounceType": "soft", "reason": "mailbox full"}); res[0]["applied"] != true {
		t.Errorf("soft bounce: %v", res)
	}
	if st, ans := e.send(key, map[string]any{"to": "soft@example.test", "subject": "s", "htmlContent": "h"}); st != 201 {
		t.Errorf("send after a soft bounce: %d %v", st, ans)
	}
	// ClickHouse has every change.
	if rows := e.chStatuses(ws, b, 4); strings.Join(rows, ",") != "queued,sent,delivered,bounced" {
		t.Errorf("clickhouse rows of the bounced message: %v", rows)
	}
	// Bad reports.
	for _, bad := range []map[string]any{{"type": "opened", "messageId": a}, {"type": "delivered"}, {"type": "bounced", "messageId": a, "bounceType": "medium"}, {"type": "delivered", "messageId": a, "occurredAt": "yesterday"}} {
		if st, _ := report(key, bad); st != 400 {
			t.Errorf("bad report %v: %d", bad, st)
		}
	}
	if st, _ := e.call("POST", "/api/providers/reports", key, map[string]any{"reports": []any{}}); st != 400 {
		t.Errorf("empty reports: %d", st)
	}
}

// snsSigner signs SNS messages with a test certificate that the verifier
// is given directly (no network).
type snsSigner struct {
	key     *rsa.PrivateKey
	cert    *x509.Certificate
	certURL string
}

func newSNSSigner(t *testing.T) *snsSigner {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &snsSigner{key: k, cert: cert, certURL: "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-test.pem"}
}

// sign fills Signature following the SNS documentation's canonical form.
func (s *snsSigner) sign(t *testing.T, m map[string]string, version string) {
	var keys []string
	if m["Type"] == "Notification" {
		keys = []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	} else {
		keys = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	}
	var b strings.Builder
	for _, k := range keys {
		if v, ok := m[k]; ok {
			b.WriteString(k + "\n" + v + "\n")
		}
	}
	var sig []byte
	var err error
	m["SignatureVersion"] = version
	m["SigningCertURL"] = s.certURL
	if version == "1" {
		d := sha1.Sum([]byte(b.String())) //nolint:gosec
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA1, d[:])
	} else {
		d := sha256.Sum256([]byte(b.String()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, d[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	m["Signature"] = base64.StdEncoding.EncodeToString(sig)
}

// TestSESNotificationsViaSNS: signed SNS deliveries of SES bounce,
// complaint and delivery notifications move messages; a subscription is
// confirmed through the injected confirmer; bad signatures, old messages
// and foreign certificates are refused with nothing changed.
func TestSESNotificationsViaSNS(t *testing.T) {
	signer := newSNSSigner(t)
	var mu sync.Mutex
	var confirmed []string
	var certAsked []string
	verifier := transactional.NewSNSVerifier(transactional.SNSConfig{
		TopicARNs: []string{"arn:aws:sns:eu-west-1:123:ses"},
		Certs: func(_ context.Context, u string) (*x509.Certificate, error) {
			mu.Lock()
			certAsked = append(certAsked, u)
			mu.Unlock()
			if err := transactional.CheckSNSURL(u); err != nil {
				return nil, err
			}
			return signer.cert, nil
		},
		Confirm: func(_ context.Context, u string) error {
			mu.Lock()
			confirmed = append(confirmed, u)
			mu.Unlock()
			return transactional.CheckSNSURL(u)
		},
	})
	e := newEnv(t, envOpts{sns: verifier})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	st, ans := e.send(key, map[string]any{"to": "ses@example.test", "cc": "copy@example.test", "subject": "s", "htmlContent": "<p>h</p>"})
	if st != 201 {
		t.Fatal(st, ans)
	}
	id, rfc := ans["id"].(string), ans["messageId"].(string)
	e.waitStatus(key, id, "sent")

	post := func(m map[string]string) (int, map[string]any) {
		t.Helper()
		raw, _ := json.Marshal(m)
		return e.call("POST", "/api/providers/ses", "", string(raw))
	}
	now := time.Now().UTC().Format(time.RFC3339)
	// Subscription confirmation.
	sub := map[string]string{"Type": "SubscriptionConfirmation", "MessageId": "m0", "Token": "tok", "TopicArn": "arn:aws:sns:eu-west-1:123:ses",
		"Message": "confirm me", "SubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&Token=tok", "Timestamp": now}
	signer.sign(t, sub, "1")
	if st, ans := post(sub); st != 200 || ans["confirmed"] != true {
		t.Fatalf("subscription confirmation: %d %v", st, ans)
	}
	mu.Lock()
	if len(confirmed) != 1 || confirmed[0] != sub["SubscribeURL"] {
		t.Errorf("confirmed %v", confirmed)
	}
	mu.Unlock()

	notification := func(mid string, ses map[string]any, version string) map[string]string {
		raw, _ := json.Marshal(ses)
		m := map[string]string{"Type": "Notification", "MessageId": mid, "TopicArn": "arn:aws:sns:eu-west-1:123:ses", "Message": string(raw), "Timestamp": now}
		signer.sign(t, m, version)
		return m
	}
	mail := map[string]any{"messageId": "ses-0001", "commonHeaders": map[string]any{"messageId": "<" + rfc + ">"}}
	delivered := notification("m1", map[string]any{"notificationType": "Delivery", "mail": mail,
		"delivery": map[string]any{"timestamp": now, "recipients": []string{"ses@example.test", "copy@example.test"}}}, "2")
	bounce := notification("m2", map[string]any{"eventType": "Bounce", "mail": map[string]any{"messageId": "ses-0001",
		"headers": []map[string]string{{"name": "X-Sendstream-Message-Id", "value": id}}},
		"bounce": map[string]any{"bounceType": "Permanent", "bounceSubType": "General", "timestamp": now,
			"bouncedRecipients": []map[string]string{{"emailAddress": "copy@example.test", "diagnosticCode": "smtp; 550 no"}, {"emailAddress": "ses@example.test", "diagnosticCode": "smtp; 550 5.1.1 unknown"}}}}, "1")

	// Tampered, stale, wrong topic and foreign certificate: refused.
	tampered := map[string]string{}
	for k, v := range bounce {
		tampered[k] = v
	}
	tampered["Message"] = strings.Replace(tampered["Message"], "Permanent", "Transient", 1)
	old := notification("m3", map[string]any{"notificationType": "Delivery", "mail": mail, "delivery": map[string]any{"recipients": []string{"ses@example.test"}}}, "2")
	old["Timestamp"] = time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	signer.sign(t, old, "2")
	wrongTopic := map[string]string{}
	for k, v := range delivered {
		wrongTopic[k] = v
	}
	wrongTopic["TopicArn"] = "arn:aws:sns:eu-west-1:999:other"
	signer.sign(t, wrongTopic, "2")
	foreign := map[string]string{}
	for k, v := range delivered {
		foreign[k] = v
	}
	signer.certURL = "https://evil.example.test/cert.pem"
	signer.sign(t, foreign, "2")
	signer.certURL = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-test.pem"
	for name, m := range map[string]map[string]string{"tampered": tampered, "stale": old, "wrong topic": wrongTopic, "foreign cert": foreign} {
		if st, ans := post(m); st != 403 || ans["code"] != "invalid_signature" {
			t.Errorf("%s: %d %v", name, st, ans)
		}
	}
	if s := e.pgStatus(id); s != "sent" {
		t.Fatalf("refused notifications changed the message to %s", s)
	}

	if st, ans := post(delivered); st != 200 {
		t.Fatalf("delivery: %d %v", st, ans)
	}
	e.waitStatus(key, id, "delivered")
	if st, ans := post(bounce); st != 200 {
		t.Fatalf("bounce: %d %v", st, ans)
	}
	sb := e.waitStatus(key, id, "bounced")
	if bn, _ := sb["bounce"].(map[string]any); bn["type"] != "hard" || bn["reason"] != "smtp; 550 5.1.1 unknown" {
		t.Errorf("bounce: %v", sb["bounce"])
	}
	// Both bounced addresses are suppressed; the message moved once.
	for _, to := range []string{"ses@example.test", "copy@example.test"} {
		if st, _ := e.send(key, map[string]any{"to": to, "subject": "s", "htmlContent": "h"}); st != 422 {
			t.Errorf("send to %s after a hard bounce: %d", to, st)
		}
	}
	// SNS redelivers: nothing new.
	if st, _ := post(bounce); st != 200 {
		t.Errorf("redelivered notification: %d", st)
	}
	b := e.waitEnvelopes(schemas.TopicWebhooks, schemas.TypeWebhookEmailBounced, ws, 1)
	if len(b) != 1 || !strings.Contains(string(b[0].Payload), `"provider":"ses"`) {
		t.Errorf("EMAIL_BOUNCED: %v", b)
	}
	// The production certificate source refuses anything but SNS hosts
	// over https, without fetching.
	for _, u := range []string{"http://sns.eu-west-1.amazonaws.com/x.pem", "https://sns.eu-west-1.amazonaws.com.evil.test/x.pem",
		"https://evil.test/sns.eu-west-1.amazonaws.com/x.pem", "https://user@sns.eu-west-1.amazonaws.com/x.pem", "https://sns.eu-west-1.amazonaws.com:8443/x.pem"} {
		if err := transactional.CheckSNSURL(u); err == nil {
			t.Errorf("CheckSNSURL accepted %s", u)
		}
	}
	for _, u := range []string{"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem", "https://sns.cn-north-1.amazonaws.com.cn/x.pem"} {
		if err := transactional.CheckSNSURL(u); err != nil {
			t.Errorf("CheckSNSURL refused %s: %v", u, err)
		}
	}
	def := transactional.NewSNSVerifier(transactional.SNSConfig{})
	bad := map[string]string{}
	for k, v := range delivered {
		bad[k] = v
	}
	bad["SigningCertURL"] = "https://127.0.0.1:1/cert.pem"
	raw, _ := json.Marshal(bad)
	var m transactional.SNSMessage
	_ = json.Unmarshal(raw, &m)
	if err := def.Verify(context.Background(), m); err == nil || !strings.Contains(err.Error(), "not https://sns.") {
		t.Errorf("default verifier with a foreign certificate URL: %v", err)
	}
}
