package transactional

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS SignatureVersion 1 is SHA1withRSA
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// SNSMessage is an Amazon SNS HTTP(S) delivery: a notification, a
// subscription confirmation or an unsubscribe confirmation.
type SNSMessage struct {
	Type             string `json:"Type"`
	MessageID        string `json:"MessageId"`
	Token            string `json:"Token,omitempty"`
	TopicArn         string `json:"TopicArn"`
	Subject          string `json:"Subject,omitempty"`
	Message          string `json:"Message"`
	Timestamp        string `json:"Timestamp"`
	SignatureVersion string `json:"SignatureVersion"`
	Signature        string `json:"Signature"`
	SigningCertURL   string `json:"SigningCertURL"`
	SubscribeURL     string `json:"SubscribeURL,omitempty"`
	UnsubscribeURL   string `json:"UnsubscribeURL,omitempty"`
}

// SNSConfig configures an SNSVerifier. Zero values take the defaults.
type SNSConfig struct {
	// Certs returns the certificate at a SigningCertURL. Default: fetched
	// over HTTPS, only from https://sns.<region>.amazonaws.com/….pem, and
	// cached. Tests inject their own and never reach the network.
	Certs func(ctx context.Context, certURL string) (*x509.Certificate, error)
	// Confirm visits a SubscribeURL to confirm a subscription. Default: an
	// HTTPS GET, only to sns.<region>.amazonaws.com hosts.
	Confirm func(ctx context.Context, subscribeURL string) error
	// TopicARNs lists the topics accepted; empty accepts any topic.
	TopicARNs []string
	// MaxAge refuses messages whose Timestamp is older (replays); default 1h.
	MaxAge time.Duration
	// HTTPClient for the default Certs and Confirm (default: 10s time-out).
	HTTPClient *http.Client
	Now        func() time.Time
}

// SNSVerifier checks SNS signatures (SignatureVersion 1, SHA1withRSA, and 2,
// SHA256withRSA) against the signing certificate. Safe for concurrent use.
type SNSVerifier struct {
	cfg   SNSConfig
	mu    sync.Mutex
	certs map[string]*x509.Certificate
}

// NewSNSVerifier returns a verifier with cfg's defaults filled in.
func NewSNSVerifier(cfg SNSConfig) *SNSVerifier {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &SNSVerifier{cfg: cfg, certs: map[string]*x509.Certificate{}}
	if v.cfg.Certs == nil {
		v.cfg.Certs = v.fetchCert
	}
	if v.cfg.Confirm == nil {
		v.cfg.Confirm = v.confirm
	}
	return v
}

// snsHost matches the hosts SNS signs and confirms from.
var snsHost = regexp.MustCompile(`^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`)

// CheckSNSURL reports whether u is an https URL on an SNS host.
func CheckSNSURL(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("sns url: %w", err)
	}
	if p.Scheme != "https" || p.User != nil || (p.Port() != "" && p.Port() != "443") || !snsHost.MatchString(p.Hostname()) {
		return fmt.Errorf("sns url %q: not https://sns.<region>.amazonaws.com", u)
	}
	return nil
}

// ErrSNSSignature is returned for a message that does not verify.
var ErrSNSSignature = errors.New("sns: signature does not verify")

// Verify checks m's topic, age and signature.
func (v *SNSVerifier) Verify(ctx context.Context, m SNSMessage) error {
	if len(v.cfg.TopicARNs) > 0 && !contains(v.cfg.TopicARNs, m.TopicArn) {
		return fmt.Errorf("sns: topic %q is not accepted", m.TopicArn)
	}
	ts, err := time.Parse(time.RFC3339, m.Timestamp)
	if err != nil {
		return fmt.Errorf("sns: timestamp %q: %w", m.Timestamp, err)
	}
	if age := v.cfg.Now().Sub(ts); age > v.cfg.MaxAge || age < -5*time.Minute {
		return fmt.Errorf("sns: message timestamp %s is outside the accepted window", m.Timestamp)
	}
	var h crypto.Hash
	switch m.SignatureVersion {
	case "1":
		h = crypto.SHA1
	case "2":
		h = crypto.SHA256
	default:
		return fmt.Errorf("sns: signature version %q", m.SignatureVersion)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil {
		return ErrSNSSignature
	}
	cert, err := v.cfg.Certs(ctx, m.SigningCertURL)
	if err != nil {
		return fmt.Errorf("sns: signing certificate: %w", err)
	}
	now := v.cfg.Now()
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return errors.New("sns: signing certificate is not valid now")
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return errors.New("sns: signing certificate has no RSA key")
	}
	text, err := m.stringToSign()
	if err != nil {
		return err
	}
	var digest []byte
	if h == crypto.SHA1 {
		d := sha1.Sum([]byte(text)) //nolint:gosec // mandated by SignatureVersion 1
		digest = d[:]
	} else {
		d := sha256.Sum256([]byte(text))
		digest = d[:]
	}
	if rsa.VerifyPKCS1v15(pub, h, digest, sig) != nil {
		return ErrSNSSignature
	}
	return nil
}

// stringToSign builds the canonical text SNS signs: "Name\nvalue\n" for
// each field of the message type, in this order.
func (m SNSMessage) stringToSign() (string, error) {
	var b strings.Builder
	add := func(k, v string) { b.WriteString(k + "\n" + v + "\n") }
	switch m.Type {
	case "Notification":
		add("Message", m.Message)
		add("MessageId", m.MessageID)
		if m.Subject != "" {
			add("Subject", m.Subject)
		}
		add("Timestamp", m.Timestamp)
		add("TopicArn", m.TopicArn)
		add("Type", m.Type)
	case "SubscriptionConfirmation", "UnsubscribeConfirmation":
		add("Message", m.Message)
		add("MessageId", m.MessageID)
		add("SubscribeURL", m.SubscribeURL)
		add("Timestamp", m.Timestamp)
		add("Token", m.Token)
		add("TopicArn", m.TopicArn)
		add("Type", m.Type)
	default:
		return "", fmt.Errorf("sns: message type %q", m.Type)
	}
	return b.String(), nil
}

// fetchCert is the production certificate source.
func (v *SNSVerifier) fetchCert(ctx context.Context, certURL string) (*x509.Certificate, error) {
	if err := CheckSNSURL(certURL); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(certURL, ".pem") {
		return nil, fmt.Errorf("sns: certificate url %q is not a .pem", certURL)
	}
	v.mu.Lock()
	c := v.certs[certURL]
	v.mu.Unlock()
	if c != nil {
		return c, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, certURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", certURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: %s", certURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", certURL, err)
	}
	blk, _ := pem.Decode(body)
	if blk == nil {
		return nil, fmt.Errorf("fetch %s: not PEM", certURL)
	}
	c, err = x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", certURL, err)
	}
	v.mu.Lock()
	if len(v.certs) > 64 {
		clear(v.certs)
	}
	v.certs[certURL] = c
	v.mu.Unlock()
	return c, nil
}

// confirm is the production subscription confirmation.
func (v *SNSVerifier) confirm(ctx context.Context, subscribeURL string) error {
	if err := CheckSNSURL(subscribeURL); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, subscribeURL, nil)
	if err != nil {
		return err
	}
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("confirm subscription: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("confirm subscription: %s", resp.Status)
	}
	return nil
}

// parseSNS decodes an SNS delivery body.
func parseSNS(body []byte) (SNSMessage, error) {
	var m SNSMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return m, fmt.Errorf("sns: body is not an SNS message: %w", err)
	}
	if m.Type == "" || m.Signature == "" {
		return m, errors.New("sns: body is not an SNS message")
	}
	return m, nil
}
