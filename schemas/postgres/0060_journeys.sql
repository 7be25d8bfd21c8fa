-- Journeys (issue 26; spec 3.3, 4.8): definitions, their immutable
-- versions, the re-entry guard and executions. sinks/journeys owns these
-- tables; `admin journey …` writes definitions, the trigger endpoint and
-- (later) the matching stage start executions, and the execution engine
-- moves them.

-- One row per journey. The trigger columns mirror the current version's
-- trigger so matching finds active journeys by index. trigger_key_hash is
-- the SHA-256 of the journey's trigger key (shown once, never stored), set
-- when the journey first becomes an api_event journey and kept if its
-- trigger changes (the trigger endpoint then answers 422).
CREATE TABLE IF NOT EXISTS journeys (
    id               text PRIMARY KEY,
    workspace_id     text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (name <> ''),
    status           text NOT NULL CHECK (status IN ('draft', 'active', 'paused', 'archived')),
    trigger_type     text NOT NULL CHECK (trigger_type IN ('api_event', 'event', 'website_event', 'list_joined')),
    trigger_event    text,
    trigger_list_id  text,
    reentry          text NOT NULL CHECK (reentry IN ('always', 'once', 'once_at_a_time')),
    trigger_key_hash bytea UNIQUE,
    current_version  integer NOT NULL CHECK (current_version >= 1),
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CHECK ((trigger_type IN ('event', 'website_event')) = (trigger_event IS NOT NULL)),
    CHECK ((trigger_type = 'list_joined') = (trigger_list_id IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS journeys_workspace ON journeys (workspace_id, created_at, id);
-- Matching: the active journeys listening for an event name or a list.
CREATE INDEX IF NOT EXISTS journeys_active_event ON journeys (workspace_id, trigger_event)
    WHERE status = 'active' AND trigger_event IS NOT NULL;
CREATE INDEX IF NOT EXISTS journeys_active_list ON journeys (workspace_id, trigger_list_id)
    WHERE status = 'active' AND trigger_list_id IS NOT NULL;

-- Every version of a journey's definition, never changed once written:
-- the canonical JSON of schemas.JourneyDefinition. An execution runs the
-- version it started with, so changing an active journey leaves running
-- executions on theirs.
CREATE TABLE IF NOT EXISTS journey_versions (
    journey_id text    NOT NULL REFERENCES journeys (id) ON DELETE CASCADE,
    version    integer NOT NULL CHECK (version >= 1),
    definition jsonb   NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (journey_id, version)
);

-- The re-entry guard: one row per journey and contact that ever entered.
-- Starting an execution upserts it in the start's transaction, and the
-- upsert's row lock serialises racing starts for one contact: under
-- reentry once a second start finds the row and is refused; under
-- once_at_a_time it is refused while running > 0. Finishing an execution
-- decrements running in the transaction that finishes it.
CREATE TABLE IF NOT EXISTS journey_entries (
    journey_id       text   NOT NULL REFERENCES journeys (id) ON DELETE CASCADE,
    contact_id       text   NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    entries          bigint NOT NULL CHECK (entries >= 1),
    running          bigint NOT NULL CHECK (running >= 0),
    first_entered_at timestamptz NOT NULL,
    last_entered_at  timestamptz NOT NULL,
    PRIMARY KEY (journey_id, contact_id)
);

-- Executions (enrollments): one contact's run through one journey
-- version. position is the step address (schemas: "2.then.0") of the step
-- it is at; next_wake_at is when its timer fires (null when it waits for
-- nothing); trigger_data is the trigger call's data or the event's
-- properties, kept for Liquid. state: active (at a step or waiting),
-- completed (ran out of steps), exited (an exit step), converted (exitOn),
-- cancelled (journey archived), failed.
CREATE TABLE IF NOT EXISTS journey_executions (
    id               text PRIMARY KEY,
    workspace_id     text    NOT NULL,
    journey_id       text    NOT NULL,
    version          integer NOT NULL,
    contact_id       text    NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    state            text    NOT NULL CHECK (state IN ('active', 'completed', 'exited', 'converted', 'cancelled', 'failed')),
    position         text    NOT NULL,
    trigger_type     text    NOT NULL,
    source_id        text,
    trigger_data     jsonb,
    started_at       timestamptz NOT NULL,
    next_wake_at     timestamptz,
    finished_at      timestamptz,
    conversion_value numeric,
    updated_at       timestamptz NOT NULL,
    FOREIGN KEY (journey_id, version) REFERENCES journey_versions (journey_id, version) ON DELETE CASCADE
);
-- admin journey executions (newest first, by state) and stats.
CREATE INDEX IF NOT EXISTS journey_executions_journey ON journey_executions (journey_id, started_at DESC, id);
CREATE INDEX IF NOT EXISTS journey_executions_journey_state ON journey_executions (journey_id, state, started_at DESC, id);
-- exitOn and unsubscribes: a contact's running executions.
CREATE INDEX IF NOT EXISTS journey_executions_contact_active ON journey_executions (contact_id) WHERE state = 'active';
