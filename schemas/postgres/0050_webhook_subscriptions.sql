-- REST hook subscriptions (spec 2.5, 4.9; issue 25): one event type and one
-- target URL each, created by POST /v1/webhooks/subscribe, removed by
-- DELETE /v1/webhooks/{id}. Subscribing the same event and URL again finds
-- the existing row (the unique key). The fan-out looks subscriptions up by
-- workspace and event, the unique key's prefix.
CREATE TABLE IF NOT EXISTS webhook_subscriptions (
    id           text        PRIMARY KEY,
    workspace_id text        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    event        text        NOT NULL,
    target_url   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_subscriptions_unique UNIQUE (workspace_id, event, target_url)
);
