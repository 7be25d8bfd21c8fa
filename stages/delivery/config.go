package delivery

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sendstream/sinks/email/render"
)

// Config configures the stage. Start from DefaultConfig.
type Config struct {
	SiteURL string // Settings["site_url"]: unsubscribe links
	Secret  string // Settings["secret"]: signs unsubscribe links (as ingest does)
	// Providers are the settings of each provider plugin by name; "smtp"
	// gets {"url": Settings["smtp_url"]}.
	Providers map[string]map[string]string
	// BatchMax bounds the messages claimed or finished per statement
	// (default 256): concurrent Handle calls share statements.
	BatchMax int
	// ClaimLease is how long another worker's claim is honoured before its
	// message is failed as "outcome unknown" (default 60s; it must exceed
	// the provider's time-out).
	ClaimLease time.Duration
	// Render bounds the render of each message (Settings
	// "render_max_iterations", "render_max_output_bytes", "render_timeout";
	// default render.DefaultBudget()). A message whose render exceeds it
	// fails with the budget as its reason ("template error: html: the
	// render exceeded its budget of …") and is not retried. The stage
	// renders with render.Shared(Render), the cache the send path fills.
	Render render.Budget
	// FooterHTML and FooterText are the marketing compliance footer;
	// {{workspace}} and {{unsubscribe_url}} are replaced (defaults below).
	FooterHTML, FooterText string
	// Now is the clock (tests).
	Now func() time.Time
}

// Default marketing footers.
const (
	DefaultFooterHTML = `<div style="margin-top:32px;padding-top:12px;border-top:1px solid #ddd;font:12px/1.5 Arial,sans-serif;color:#666">You are receiving this email because you are subscribed to {{workspace}}. <a href="{{unsubscribe_url}}" style="color:#666">Unsubscribe</a></div>`
	DefaultFooterText = "\n\n--\nYou are receiving this email because you are subscribed to {{workspace}}.\nUnsubscribe: {{unsubscribe_url}}\n"
)

// DefaultConfig returns the configuration the registered stage starts from.
func DefaultConfig() Config {
	return Config{
		SiteURL: "http://127.0.0.1:8080", BatchMax: 256, ClaimLease: time.Minute,
		FooterHTML: DefaultFooterHTML, FooterText: DefaultFooterText,
		Providers: map[string]map[string]string{"smtp": {"url": "smtp://127.0.0.1:1025"}},
		Render:    render.DefaultBudget(),
	}
}

// FromSettings applies the process settings (site_url, secret, smtp_url,
// <provider>_url and the render budget's render_max_iterations,
// render_max_output_bytes and render_timeout; a value that does not parse
// becomes -1, which Validate refuses).
func (c Config) FromSettings(s map[string]string) Config {
	for k, dst := range map[string]*int64{"render_max_iterations": &c.Render.MaxIterations, "render_max_output_bytes": &c.Render.MaxOutputBytes} {
		if v := s[k]; v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				n = -1
			}
			*dst = n
		}
	}
	if v := s["render_timeout"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			d = -1
		}
		c.Render.Timeout = d
	}
	if v := s["site_url"]; v != "" {
		c.SiteURL = v
	}
	if v := s["secret"]; v != "" {
		c.Secret = v
	}
	p := map[string]map[string]string{}
	for k, v := range c.Providers {
		p[k] = v
	}
	for k, v := range s {
		if name, ok := strings.CutSuffix(k, "_url"); ok && name != "site" && v != "" {
			p[name] = map[string]string{"url": v}
		}
	}
	c.Providers = p
	return c
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Secret == "":
		return errors.New("delivery: no secret to sign unsubscribe links (Settings[\"secret\"])")
	case c.BatchMax < 1:
		return errors.New("delivery: the statement batch size must be positive")
	case c.ClaimLease < time.Second:
		return errors.New("delivery: claim lease under a second")
	}
	if err := c.Render.Validate(); err != nil {
		return fmt.Errorf("delivery: %w", err)
	}
	return nil
}
