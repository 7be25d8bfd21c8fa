-- event_claims, keyed by the event id instead of (workspace, externalId).
-- The event id of an event with an externalId is
-- schemas.IDFromKey(workspace, "event", externalId): 128 bits, one per
-- (workspace, externalId), so it is the claim key itself. Stored as uuid
-- (16 bytes, the same 32 hex digits), the primary key is a third the width
-- of the (text, text) key of 0020, which makes the claim insert on the hot
-- path cheaper. Replaces 0020's table (claims are idempotency records only;
-- nothing else refers to them).
DROP TABLE IF EXISTS event_claims;
CREATE TABLE event_claims (
    -- The event id (32 hex digits, shown without dashes by the API).
    event_id     uuid        PRIMARY KEY,
    workspace_id text        NOT NULL,
    -- The contact the first request matched, NULL when none.
    contact_id   text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
