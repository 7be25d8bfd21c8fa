package members

import (
	"errors"
	"time"
)

// Config tunes sign-in and sessions. Zero fields take the defaults noted;
// the root config.go fills it from SENDSTREAM_* variables.
type Config struct {
	// SiteURL is the site root; the session cookie is Secure when it is
	// https (default http://127.0.0.1:8080).
	SiteURL string
	// HashConcurrency bounds the argon2id hashes running at once in this
	// process (default 2; each takes 19 MiB).
	HashConcurrency int
	// SessionMaxAge ends a session this long after sign-in, however active
	// (default 14 days).
	SessionMaxAge time.Duration
	// SessionIdle ends a session not used for this long (default 2 days).
	SessionIdle time.Duration
	// AccountFailures failed sign-ins for one email within FailureWindow
	// refuse every further attempt for that email, the right password
	// included, until the window ends (default 10).
	AccountFailures int
	// AddressFailures is the same bound per client address (default 100:
	// offices share one address).
	AddressFailures int
	// FailureWindow is the throttling window; it starts at the first
	// failure (default 15 minutes).
	FailureWindow time.Duration
	// InvitationTTL is how long an invitation can be accepted (default 7
	// days).
	InvitationTTL time.Duration
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	if c.HashConcurrency < 0 || c.AccountFailures < 0 || c.AddressFailures < 0 ||
		c.SessionMaxAge < 0 || c.SessionIdle < 0 || c.FailureWindow < 0 || c.InvitationTTL < 0 {
		return errors.New("members config: negative setting")
	}
	return nil
}

func (c *Config) withDefaults() {
	if c.SiteURL == "" {
		c.SiteURL = "http://127.0.0.1:8080"
	}
	if c.HashConcurrency == 0 {
		c.HashConcurrency = 2
	}
	if c.SessionMaxAge == 0 {
		c.SessionMaxAge = 14 * 24 * time.Hour
	}
	if c.SessionIdle == 0 {
		c.SessionIdle = 2 * 24 * time.Hour
	}
	if c.AccountFailures == 0 {
		c.AccountFailures = 10
	}
	if c.AddressFailures == 0 {
		c.AddressFailures = 100
	}
	if c.FailureWindow == 0 {
		c.FailureWindow = 15 * time.Minute
	}
	if c.InvitationTTL == 0 {
		c.InvitationTTL = 7 * 24 * time.Hour
	}
}
