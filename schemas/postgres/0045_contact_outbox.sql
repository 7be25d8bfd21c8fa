-- Transactional outbox of the contacts domain events (issue 24, item 6).
-- The statement that creates or changes a contact (ingest/contacts
-- upsert_contacts.sql) writes one row here in the same transaction: what
-- happened (kind: created, updated) and the contact after the change (and,
-- for updates, its values before), from which the envelope is rebuilt with
-- the same id the request publishes. The request publishes the envelope
-- itself and deletes the row after the broker's ack; the relay publishes
-- rows older than its grace period (left behind by a crash, a failed
-- publish or a time-out), claiming them with FOR UPDATE SKIP LOCKED, and
-- deletes them. So the table holds only announcements not yet known to be
-- published: a few rows, churned by inserts and deletes.
CREATE TABLE IF NOT EXISTS contact_outbox (
    id           bigserial PRIMARY KEY,
    workspace_id text        NOT NULL,
    contact_id   text        NOT NULL,
    kind         text        NOT NULL,
    data         jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE contact_outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
