package delivery

import (
	"testing"
	"time"
)

func TestConfigFromSettingsAndValidate(t *testing.T) {
	c := DefaultConfig().FromSettings(map[string]string{
		"site_url": "https://mail.example.com", "secret": "s", "smtp_url": "smtp://relay:587", "ses_url": "https://x", "site_name": "ignored",
	})
	if c.SiteURL != "https://mail.example.com" || c.Secret != "s" || c.Providers["smtp"]["url"] != "smtp://relay:587" || c.Providers["ses"]["url"] != "https://x" {
		t.Errorf("from settings: %+v", c)
	}
	if _, ok := c.Providers["site"]; ok {
		t.Error("site_url taken for a provider")
	}
	if err := c.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	for name, bad := range map[string]func(*Config){
		"no secret":   func(c *Config) { c.Secret = "" },
		"no batch":    func(c *Config) { c.BatchMax = 0 },
		"short lease": func(c *Config) { c.ClaimLease = time.Millisecond },
		"bad budget":  func(c *Config) { c.Render.Timeout = -1 },
	} {
		cc := c
		bad(&cc)
		if cc.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if DefaultConfig().Providers["smtp"]["url"] != "smtp://127.0.0.1:1025" {
		t.Error("default relay")
	}
}
