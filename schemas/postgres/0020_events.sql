-- Events and goals (ingest/events, stages/goals).
--
-- event_claims (replaced by 0021_event_claims_by_id.sql): the externalId
-- idempotency claims of POST /v1/events,
-- /v1/events/import and /public/events. One row per (workspace, externalId),
-- inserted in the same statement that resolves the contact, before the event
-- is published; a repeat finds the row and answers "duplicate" with its
-- event_id. No foreign key to workspaces: a key-share lock on one hot
-- workspace row per claim would serialise claims through MultiXacts.
CREATE TABLE IF NOT EXISTS event_claims (
    workspace_id text        NOT NULL,
    external_id  text        NOT NULL,
    -- schemas.IDFromKey(workspace, "event", external_id): the event's id.
    event_id     text        NOT NULL,
    -- The contact the first request matched, NULL when none.
    contact_id   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, external_id)
);

-- event_ledger: the id of every goal event whose effects the goals stage
-- applied, written in the same transaction as the effects, so a redelivered
-- or republished goal is counted once (the stage's dedup by envelope id).
-- Plain events need no entry: their only effect, last_activity_at =
-- greatest(...), is idempotent.
CREATE TABLE IF NOT EXISTS event_ledger (
    event_id     text        PRIMARY KEY,
    workspace_id text        NOT NULL,
    contact_id   text        NOT NULL,
    applied_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS event_ledger_applied ON event_ledger (applied_at);

-- contact_activity: per contact, what recorded events tell about it, for
-- goal-based segment rules: last activity, lifetime value (sum of goal
-- values, refunds negative, as sent: one currency per workspace is assumed),
-- purchases (purchase goals with a positive value) and the last purchase.
CREATE TABLE IF NOT EXISTS contact_activity (
    contact_id       text        PRIMARY KEY REFERENCES contacts (id) ON DELETE CASCADE,
    workspace_id     text        NOT NULL,
    last_activity_at timestamptz,
    goals            bigint      NOT NULL DEFAULT 0,
    lifetime_value   numeric     NOT NULL DEFAULT 0,
    purchase_count   bigint      NOT NULL DEFAULT 0,
    refund_count     bigint      NOT NULL DEFAULT 0,
    last_purchase_at timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS contact_activity_workspace ON contact_activity (workspace_id);
