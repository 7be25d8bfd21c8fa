package main

import (
	"context"

	"sendstream/deploy/admincli"
	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
	"sendstream/ingest/events"
	"sendstream/ingest/journeys"
	"sendstream/ingest/members"
	"sendstream/ingest/oauth"
	"sendstream/ingest/ratelimit"
	"sendstream/ingest/tracking"
	"sendstream/ingest/transactional"
	"sendstream/ingest/webhooks"
	"sendstream/pipeline"
	"sendstream/sinks/email/render"
	journeystore "sendstream/sinks/journeys"
	"sendstream/sinks/timers"
	"sendstream/sinks/webhook"
	"sendstream/stages/analytics"
	"sendstream/stages/requestlog"
	"sendstream/stages/webhooklog"
)

// features is what featureRoutes builds: the routes, and the stores the
// rest of the HTTP edge shares with them (one of each per process).
type features struct {
	routes []ingest.Route
	// contacts is also the outbox of invitation emails (ingest/members).
	contacts *contacts.Store
	// messages is also what the dashboard's message log reads.
	messages *transactional.Store
}

// featureRoutes lists the routes of every feature package beyond the core
// ones the ingest server always has. Background work a feature starts with
// the HTTP edge (the contacts outbox relay) stops when ctx ends. A feature
// that caches credentials or workspace state subscribes to inval, the
// process's credential-change listener (nil: none, caches expire by TTL).
func featureRoutes(ctx context.Context, cfg Config, res pipeline.Resources, inval *auth.Listener) features {
	var routes []ingest.Route
	// Contacts, lists, the hosted sign-up form and double opt-in. serve
	// always sets cfg.Secret (SENDSTREAM_SECRET or a generated local one).
	signer, err := contacts.NewSigner(cfg.Secret, 0)
	if err != nil {
		panic(err)
	}
	contactStore := contacts.NewStore(res.Postgres)
	contactStore.SetFaultExitAfterCommit(cfg.FaultExitAfterCommit)
	contactStore.SetOutboxScope(cfg.TopicPrefix)
	if res.Publisher != nil {
		// The outbox relay runs with the HTTP edge: it publishes the
		// contact events a crashed, failed or timed-out request left behind.
		contactStore.StartRelay(ctx, res.Publisher, contacts.RelayConfig{Grace: cfg.OutboxGrace, Logger: res.Logger})
	}
	routes = append(routes, contacts.Routes(contacts.Deps{
		Store: contactStore, Signer: signer, SiteURL: cfg.SiteURL, Logger: res.Logger,
	})...)
	// Transactional email: send, validate, list, status, the unsubscribe
	// page and provider reports (ingest/transactional).
	messages := transactional.NewStore(res.Postgres)
	routes = append(routes, transactional.Routes(transactional.Deps{
		PG: res.Postgres, Store: messages, Contacts: contactStore, SiteURL: cfg.SiteURL, Secret: cfg.Secret, Logger: res.Logger,
		Engine: render.Shared(cfg.Render), // one cache with the delivery stage
	})...)
	// Events and website tracking (ingest/events, ingest/tracking).
	eventStore, err := events.NewStore(res.Postgres, events.StoreConfig{})
	if err != nil {
		panic(err)
	}
	routes = append(routes, events.Routes(events.Deps{Store: eventStore})...)
	// The journey trigger (ingest/journeys): its started announcements go
	// through the contacts outbox and relay.
	// A start whose journey begins with a wait commits the execution in
	// it, its own timer: the wake relay of the engine processes of this
	// topic prefix fires it (stages/journeys).
	jd := journeys.Deps{Store: journeystore.NewStore(res.Postgres, res.ClockOrSystem().Now), Outbox: contactStore,
		WakeScope: timers.QueueFor(cfg.TopicPrefix)}
	routes = append(routes, journeys.Routes(jd)...)
	trackingAuth := auth.NewCache(auth.NewStore(res.Postgres), auth.CacheConfig{TTL: cfg.KeyCacheTTL})
	if inval != nil {
		inval.Subscribe(trackingAuth.Evict)
	}
	routes = append(routes, tracking.Routes(tracking.Deps{
		Auth:    trackingAuth,
		Limiter: ratelimit.New(res.Postgres, ratelimit.Options{}),
	})...)
	// REST hooks: subscribe, delete, the event catalogue (ingest/webhooks).
	// The guard lets through the ranges of SENDSTREAM_WEBHOOK_ALLOW_PRIVATE
	// (runRoles logs the warning).
	guard := webhook.NewGuard(webhook.GuardConfig{AllowPrivate: cfg.Webhooks.AllowPrivate})
	routes = append(routes, webhooks.Routes(webhooks.Deps{Store: webhooks.NewStore(res.Postgres), Guard: guard})...)
	// OAuth: token, revocation and discovery (ingest/oauth; the consent
	// page and the dashboard's app routes need sessions: serve.go).
	routes = append(routes, oauth.Routes(oauth.Deps{Store: oauth.NewStore(res.Postgres), SiteURL: cfg.SiteURL})...)
	return features{routes: routes, contacts: contactStore, messages: messages}
}

// featureAdminCommands lists the `sendstream admin` commands of every
// feature, each declared beside the feature's code as its routes are; a new
// feature adds its commands here with one line. A name declared twice fails
// every admin command (admincli.Index).
func featureAdminCommands() []admincli.Command {
	var cmds []admincli.Command
	// Workspaces, API keys and tracking tokens (ingest/auth).
	cmds = append(cmds, auth.AdminCommands()...)
	// Members who sign in to the dashboard (ingest/members).
	cmds = append(cmds, members.AdminCommands()...)
	// OAuth apps: create, rotate-secret, delete (ingest/oauth).
	cmds = append(cmds, oauth.AdminCommands()...)
	// Lists and custom fields (ingest/contacts).
	cmds = append(cmds, contacts.AdminCommands()...)
	// Templates, send policies and sending domains (ingest/transactional).
	cmds = append(cmds, transactional.AdminCommands()...)
	// Journeys: create, update, activate, pause, archive, executions, stats
	// (ingest/journeys).
	cmds = append(cmds, journeys.AdminCommands()...)
	// The events' analytics reports (stages/analytics) and the request log
	// (stages/requestlog), both read from ClickHouse.
	cmds = append(cmds, analytics.AdminCommands()...)
	cmds = append(cmds, requestlog.AdminCommands()...)
	// The webhook delivery log and replay (stages/webhooklog), read from
	// ClickHouse; replay publishes to the deliveries topic.
	cmds = append(cmds, webhooklog.AdminCommands()...)
	// Dashboard webhook endpoints (ingest/webhooks).
	cmds = append(cmds, webhooks.AdminCommands(adminWebhookSettings)...)
	return cmds
}
