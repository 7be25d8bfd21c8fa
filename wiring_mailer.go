package main

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/ingest/contacts"
	"sendstream/ingest/transactional"
	"sendstream/pipeline"
	"sendstream/sinks/email/render"
)

// stageMailer is the transactional path the stages that send email use
// (pipeline.Resources.Mailer: the journey engine's send_email steps), so
// stages send exactly as POST /v1/transactional/send does without
// importing ingest. nil without a secret (it signs unsubscribe links).
func stageMailer(cfg Config, pg *pgxpool.Pool) pipeline.Mailer {
	m, err := transactional.NewMailer(transactional.Deps{PG: pg, Secret: cfg.Secret, SiteURL: cfg.SiteURL,
		Engine: render.Shared(cfg.Render)})
	if err != nil {
		return nil
	}
	return m
}

// stageContacts is the contacts store the stages that change contacts use
// (pipeline.Resources.Contacts: the journey engine's contact and list
// steps), and its Close.
func stageContacts(pg *pgxpool.Pool, topicPrefix string) (pipeline.ContactWriter, func()) {
	s := contacts.NewStore(pg)
	s.SetOutboxScope(topicPrefix) // the serving process's relay publishes its rows
	return contacts.NewStageWriter(s), s.Close
}
