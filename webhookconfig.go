package main

import (
	"os"

	"sendstream/ingest"
	"sendstream/ingest/webhooks"
	"sendstream/pipeline"
)

// loadWebhookOutbound reads the outgoing-webhook settings for local
// development: SENDSTREAM_WEBHOOK_ALLOW_PRIVATE (comma-separated CIDRs the
// SSRF guard lets through) and SENDSTREAM_WEBHOOK_INSECURE_TLS=1 (accept
// self-signed receiver certificates). Both default to off; they join Config
// once config.go is free to change.
func loadWebhookOutbound() (webhooks.Outbound, error) {
	return webhooks.ParseOutbound(os.Getenv("SENDSTREAM_WEBHOOK_ALLOW_PRIVATE"), os.Getenv("SENDSTREAM_WEBHOOK_INSECURE_TLS"))
}

// webhookRoutes returns the REST hooks endpoints (ingest/webhooks). It logs
// a warning for each outgoing-webhook setting that is on, and panics, as
// featureRoutes does, when a setting is malformed.
func webhookRoutes(res pipeline.Resources) []ingest.Route {
	out, err := loadWebhookOutbound()
	if err != nil {
		panic(err)
	}
	out.Warn(res.Logger)
	guard := webhooks.NewGuard(webhooks.GuardConfig{AllowPrivate: out.AllowPrivate})
	return webhooks.Routes(webhooks.Deps{Store: webhooks.NewStore(res.Postgres), Guard: guard})
}
