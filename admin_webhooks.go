package main

import (
	"sendstream/ingest/webhooks"
)

// adminWebhookSettings gives the webhook-endpoint commands the server's
// settings: its secret (SENDSTREAM_SECRET, else the local one serve
// generates in the data dir, so that the server can open the endpoint
// secrets the command encrypts) and SENDSTREAM_WEBHOOK_ALLOW_PRIVATE.
func adminWebhookSettings() (webhooks.AdminSettings, error) {
	cfg, err := loadConfig()
	if err != nil {
		return webhooks.AdminSettings{}, err
	}
	if cfg.Secret == "" {
		if cfg.Secret, err = localSecret(cfg.DataDir); err != nil {
			return webhooks.AdminSettings{}, err
		}
	}
	return webhooks.AdminSettings{Secret: cfg.Secret, AllowPrivate: cfg.Webhooks.AllowPrivate}, nil
}
