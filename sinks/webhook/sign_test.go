package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"sendstream/sinks/webhook"
)

// headersOf returns the signature headers of s as net/http headers.
func headersOf(s webhook.Signed) http.Header {
	h := http.Header{}
	s.Headers(h.Set)
	return h
}

// verifier returns the reference library's verifier for a secret: for a
// whsec_ secret the library decodes it itself; any other secret's bytes are
// the raw key (spec 6).
func verifier(t *testing.T, secret string) *standardwebhooks.Webhook {
	t.Helper()
	var wh *standardwebhooks.Webhook
	var err error
	if strings.HasPrefix(secret, webhook.SecretPrefix) {
		wh, err = standardwebhooks.NewWebhook(secret)
	} else {
		wh, err = standardwebhooks.NewWebhookRaw([]byte(secret))
	}
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

func TestNewSecret(t *testing.T) {
	a, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := webhook.NewSecret()
	if a == b || !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("secrets %q %q", a, b)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "whsec_"))
	if err != nil || len(key) != 24 {
		t.Fatalf("key of %q: %d bytes, %v", a, len(key), err)
	}
	if err := webhook.ValidateSecret(a); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"whsec_", "whsec_!!!", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 8)), "short", "has space in the secret value"} {
		if webhook.ValidateSecret(bad) == nil {
			t.Errorf("ValidateSecret(%q) accepted it", bad)
		}
	}
}

// TestSignVerifiesWithReference: every signed message verifies with the
// Standard Webhooks reference library, for generated and plain secrets.
func TestSignVerifiesWithReference(t *testing.T) {
	gen, _ := webhook.NewSecret()
	body := []byte(`{"id":"msg_1","event":"CONTACT_CREATED","timestamp":"2026-01-01T00:00:00Z","teamId":"w","data":{"email":"a@b.c"}}`)
	for _, secret := range []string{gen, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "plain-secret-without-prefix-123"} {
		s := webhook.Sign([]string{secret}, "msg_1", time.Now(), body)
		if err := verifier(t, secret).Verify(body, headersOf(s)); err != nil {
			t.Errorf("secret %q: reference verifier: %v (headers %+v)", secret, err, s)
		}
		// A changed body, id or timestamp fails.
		if verifier(t, secret).Verify(append(body[:len(body):len(body)], ' '), headersOf(s)) == nil {
			t.Errorf("secret %q: a changed body verified", secret)
		}
		h := headersOf(s)
		h.Set("webhook-id", "msg_2")
		if verifier(t, secret).Verify(body, h) == nil {
			t.Errorf("secret %q: a changed id verified", secret)
		}
	}
	// A timestamp outside the tolerance is refused by the receiver.
	s := webhook.Sign([]string{gen}, "msg_1", time.Now().Add(-10*time.Minute), body)
	if verifier(t, gen).Verify(body, headersOf(s)) == nil {
		t.Error("a 10-minute-old timestamp verified")
	}
}

// TestSignRotation: during a rotation two space-separated signatures are
// sent; a receiver holding either the old or the new secret verifies, one
// holding neither does not.
func TestSignRotation(t *testing.T) {
	oldS, _ := webhook.NewSecret()
	newS, _ := webhook.NewSecret()
	other, _ := webhook.NewSecret()
	body := []byte(`{"id":"m","event":"EMAIL_BOUNCED","data":{}}`)
	s := webhook.Sign([]string{newS, oldS}, "m", time.Now(), body)
	if parts := strings.Split(s.Signature, " "); len(parts) != 2 || !strings.HasPrefix(parts[0], "v1,") || !strings.HasPrefix(parts[1], "v1,") {
		t.Fatalf("signature header %q: want two v1 signatures", s.Signature)
	}
	for _, sec := range []string{oldS, newS} {
		if err := verifier(t, sec).Verify(body, headersOf(s)); err != nil {
			t.Errorf("rotation: verifier with one of the secrets: %v", err)
		}
	}
	if verifier(t, other).Verify(body, headersOf(s)) == nil {
		t.Error("rotation: a third secret verified")
	}
}

// TestLegacySignature checks X-Signature-256 against its definition:
// sha256= and the hex HMAC-SHA256 of the raw body under the key.
func TestLegacySignature(t *testing.T) {
	secret, _ := webhook.NewSecret()
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	body := []byte(`{"x":1}`)
	m := hmac.New(sha256.New, key)
	m.Write(body)
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	s := webhook.Sign([]string{secret, "older-secret-value-1234"}, "m", time.Now(), body)
	if s.Legacy != want {
		t.Fatalf("X-Signature-256 %q, want %q", s.Legacy, want)
	}
	h := headersOf(s)
	if h.Get("X-Signature-256") != want || h.Get("webhook-id") != "m" || h.Get("webhook-timestamp") == "" {
		t.Fatalf("headers %v", h)
	}
	// Without a secret nothing is signed.
	if h := headersOf(webhook.Sign(nil, "m", time.Now(), body)); len(h) != 0 {
		t.Fatalf("unsigned headers %v", h)
	}
	// A non-whsec secret's key is its bytes.
	m = hmac.New(sha256.New, []byte("plain-secret-value-42"))
	m.Write(body)
	if got := webhook.LegacySignature(webhook.SecretKey("plain-secret-value-42"), body); got != "sha256="+hex.EncodeToString(m.Sum(nil)) {
		t.Fatalf("plain secret: %s", got)
	}
}
