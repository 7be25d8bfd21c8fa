package delivery

import (
	"context"
	"crypto"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
	"sendstream/sinks/email"
	"sendstream/sinks/email/render"
)

// This file builds a message: render (Liquid, through the process's shared
// template cache), MIME with the marketing footer and unsubscribe headers,
// and the DKIM signature with the sending domain's key (cached).

//go:embed sql/dkim_key.sql
var sqlDKIMKey string

// permanentBuild is a message that cannot be built (a template that fails
// to render): it fails rather than retries.
type permanentBuild struct{ err error }

func (e permanentBuild) Error() string { return e.err.Error() }
func (e permanentBuild) Unwrap() error { return e.err }

// build renders the message and returns its signed RFC 5322 bytes and the
// subject as rendered (stored with the outcome, for the message log).
func (s *Stage) build(ctx context.Context, ws string, p *schemas.SendPayload) (raw []byte, subject string, err error) {
	compiled, err := s.engine.Compile(render.Source{Subject: p.Subject, Preheader: p.Preheader, HTML: p.HTML, Text: p.Text})
	if err != nil {
		return nil, "", permanentBuild{fmt.Errorf("template error: %w", err)}
	}
	data, _, err := render.DecodeData(p.Data)
	if err != nil {
		return nil, "", permanentBuild{fmt.Errorf("decode data: %w", err)}
	}
	var rc *render.Contact
	var custom map[string]any
	if c := p.Contact; c != nil {
		rc = &render.Contact{ID: c.ID, Email: c.Email, FirstName: c.FirstName, Country: c.Country, Language: c.Language, Status: c.Status}
		custom = c.CustomFields
	}
	out, err := compiled.Render(render.NewBindings(data, rc, custom))
	if err != nil {
		return nil, "", permanentBuild{fmt.Errorf("template error: %w", err)}
	}
	html, text := email.InsertPreheader(out.HTML, out.Preheader), out.Text
	content := email.Content{
		MessageID: p.RFCMessageID, Date: s.cfg.Now(), From: email.Address{Email: p.From.Email, Name: p.From.Name},
		To: p.To, Cc: p.Cc, ReplyTo: p.ReplyTo, Subject: out.Subject,
		Headers: [][2]string{{"X-Sendstream-Message-Id", p.MessageID}},
	}
	if p.Policy.Kind == schemas.PolicyMarketing {
		contactID := ""
		if p.Contact != nil {
			contactID = p.Contact.ID
		}
		u := email.UnsubscribeURL(s.cfg.SiteURL, s.cfg.Secret, email.Unsubscribe{Workspace: ws, Email: p.To, ContactID: contactID, MessageID: p.MessageID})
		name := p.WorkspaceName
		if name == "" {
			name = "this sender"
		}
		fill := strings.NewReplacer("{{workspace}}", escapeHTML(name), "{{unsubscribe_url}}", escapeHTML(u))
		html = email.AppendFooter(html, fill.Replace(s.cfg.FooterHTML))
		text += strings.NewReplacer("{{workspace}}", name, "{{unsubscribe_url}}", u).Replace(s.cfg.FooterText)
		content.ListUnsubscribe = u
	}
	content.HTML, content.Text = html, text
	for _, a := range p.Attachments {
		content.Parts = append(content.Parts, email.Part{Filename: a.Filename, ContentType: a.ContentType, ContentID: a.ContentID, Content: a.Content})
	}
	raw, err = email.Build(content)
	if err != nil {
		return nil, "", permanentBuild{err}
	}
	domain := p.From.Email[strings.LastIndexByte(p.From.Email, '@')+1:]
	key, err := s.keys.get(ctx, s.pg, ws, domain)
	if err != nil {
		return nil, "", err // Postgres unavailable: retry
	}
	if key == nil {
		return raw, out.Subject, nil
	}
	signed, err := email.Sign(raw, *key)
	if err != nil {
		return nil, "", permanentBuild{err}
	}
	return signed, out.Subject, nil
}

func escapeHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace(s)
}

// keyCache holds DKIM keys by workspace and domain for ttl (nil: the domain
// does not sign). Safe for concurrent use.
type keyCache struct {
	mu  sync.Mutex
	m   map[string]keyEntry
	ttl time.Duration
}

type keyEntry struct {
	key *email.DKIMKey
	at  time.Time
}

// get returns the key of ws's domain, read from Postgres when it is not
// cached or older than ttl. An error is Postgres's (retry later) or a key
// that does not parse (permanentBuild).
func (c *keyCache) get(ctx context.Context, pg *pgxpool.Pool, ws, domain string) (*email.DKIMKey, error) {
	k := ws + "\x00" + domain
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && time.Since(e.at) < c.ttl {
		return e.key, nil
	}
	var selector string
	var pemKey *string
	err := pg.QueryRow(ctx, sqlDKIMKey, ws, domain).Scan(&selector, &pemKey)
	var key *email.DKIMKey
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("read dkim key: %w", err)
	case pemKey != nil && *pemKey != "":
		var signer crypto.Signer
		if signer, err = email.ParseDKIMKey(*pemKey); err != nil {
			return nil, permanentBuild{err}
		}
		key = &email.DKIMKey{Domain: domain, Selector: selector, Signer: signer}
	}
	c.mu.Lock()
	if len(c.m) > 10000 {
		clear(c.m)
	}
	c.m[k] = keyEntry{key: key, at: time.Now()}
	c.mu.Unlock()
	return key, nil
}
