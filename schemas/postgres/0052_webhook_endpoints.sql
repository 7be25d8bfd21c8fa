-- Dashboard webhook endpoints (spec 2.5, 6; issue 25): an https:// URL and
-- several event types each, created and managed with `sendstream admin
-- webhook-endpoint …`. Deliveries are signed with the endpoint's secret,
-- so the secret is kept usable: secret_enc is the secret sealed with
-- AES-256-GCM under a key derived from the server secret (SENDSTREAM_SECRET),
-- never the plaintext (sinks/webhook endpoint_crypt.go). After a rotation
-- the replaced secret stays in previous_secret_enc and keeps signing beside
-- the new one until previous_expires_at (24 hours). failing_since is set by
-- the delivery stage on the first failure of a run of failures and cleared
-- on a success; the schedule disables an endpoint failing for more than
-- 12 hours (enabled false, disabled_reason, disabled_at).
CREATE TABLE IF NOT EXISTS webhook_endpoints (
    id                  text        PRIMARY KEY,
    workspace_id        text        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    url                 text        NOT NULL,
    events              text[]      NOT NULL,
    enabled             boolean     NOT NULL DEFAULT true,
    disabled_reason     text,
    disabled_at         timestamptz,
    secret_enc          bytea       NOT NULL,
    previous_secret_enc bytea,
    previous_expires_at timestamptz,
    failing_since       timestamptz,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    CONSTRAINT webhook_endpoints_events CHECK (cardinality(events) > 0)
);
-- Every lookup names the workspace: the list in creation order, the
-- fan-out's enabled endpoints of one workspace, one endpoint by id.
CREATE INDEX IF NOT EXISTS webhook_endpoints_workspace
    ON webhook_endpoints (workspace_id, created_at, id);
