-- A contact upsert's contact_outbox row carries the contact in columns of
-- its own instead of a jsonb object in data (issue 24, item 6: the outbox's
-- cost on contacts upsert). Building that object per row was most of what
-- the outbox added to upsert_contacts.sql: EXPLAIN ANALYZE of 16-contact
-- batches, alternated, took 4.3-5.5 ms with it (three runs), 4.0 ms with
-- these columns, and 3.9-4.2 ms with no outbox row at all; a column only
-- copies the value. data keeps {"old": ...} for an update ({} for a
-- creation), rid the request id. Rows written before this migration have
-- NULL email and keep everything in data; the relay reads both.
ALTER TABLE contact_outbox
    ADD COLUMN IF NOT EXISTS rid                text,
    ADD COLUMN IF NOT EXISTS email              text,
    ADD COLUMN IF NOT EXISTS first_name         text,
    ADD COLUMN IF NOT EXISTS country            text,
    ADD COLUMN IF NOT EXISTS language           text,
    ADD COLUMN IF NOT EXISTS status             text,
    ADD COLUMN IF NOT EXISTS source             text,
    ADD COLUMN IF NOT EXISTS custom_fields      jsonb,
    ADD COLUMN IF NOT EXISTS contact_created_at timestamptz,
    ADD COLUMN IF NOT EXISTS contact_updated_at timestamptz;
