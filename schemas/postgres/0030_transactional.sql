-- Transactional email (spec 2.4, 3.1, 4.2-4.4): templates, sending domains,
-- send policies, the suppression list, messages and oversized payloads.
-- ingest/transactional and the delivery stage own these tables.

-- Templates. version goes up on every change; parsed templates are cached by
-- their source, so a change is picked up by the next send.
CREATE TABLE IF NOT EXISTS templates (
    id                 text PRIMARY KEY,
    workspace_id       text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name               text NOT NULL DEFAULT '',
    subject            text NOT NULL DEFAULT '',
    preheader          text NOT NULL DEFAULT '',
    html               text NOT NULL,
    text_body          text NOT NULL DEFAULT '',
    -- Variable paths that must resolve for a send ("order.id" means data.order.id).
    required_variables text[] NOT NULL DEFAULT '{}',
    -- {"<language>": {"subject", "preheader", "html", "text"}}; a missing part
    -- falls back to the default language's.
    translations       jsonb NOT NULL DEFAULT '{}',
    version            bigint NOT NULL DEFAULT 1,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS templates_workspace ON templates (workspace_id, created_at);

-- Domains a workspace owns: fromEmail must be on one of them. A DKIM key
-- (PKCS#8 PEM, RSA-2048) signs mail from the domain.
CREATE TABLE IF NOT EXISTS sending_domains (
    workspace_id     text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    domain           text NOT NULL CHECK (domain = lower(domain) AND length(domain) BETWEEN 3 AND 253),
    dkim_selector    text NOT NULL DEFAULT 'sendstream',
    dkim_private_key text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, domain)
);

-- Send policies: delivery route (provider plugin), default sender and kind.
-- A workspace without a row keyed 'transactional' uses a built-in default
-- Transactional policy (see ingest/transactional).
CREATE TABLE IF NOT EXISTS send_policies (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    key          text NOT NULL CHECK (key ~ '^[a-z0-9][a-z0-9_.-]{0,63}$'),
    kind         text NOT NULL CHECK (kind IN ('transactional', 'marketing')),
    from_email   text,
    from_name    text,
    provider     text NOT NULL DEFAULT 'smtp',
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT send_policies_workspace_key UNIQUE (workspace_id, key)
);

-- The suppression list. bounced, complained and erased addresses are refused
-- by every policy; unsubscribed ones by marketing policies.
CREATE TABLE IF NOT EXISTS suppressions (
    workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    email        text NOT NULL,
    reason       text NOT NULL CHECK (reason IN ('bounced', 'complained', 'erased', 'unsubscribed')),
    message_id   text,
    detail       text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, email, reason)
);

-- Messages. id is the service's message id (derived from externalId when
-- given); seq orders lists newest first. claim_token/claimed_at mark a
-- hand-off to the provider in progress (the delivery stage's exactly-once
-- guard); request_hash lets a repeated externalId re-publish a message whose
-- first publish may have failed.
CREATE TABLE IF NOT EXISTS transactional_messages (
    id                  text PRIMARY KEY,
    workspace_id        text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    seq                 bigint GENERATED ALWAYS AS IDENTITY,
    external_id         text,
    request_hash        bytea,
    to_email            text NOT NULL,
    contact_id          text,
    rfc_message_id      text NOT NULL,
    policy_id           text NOT NULL,
    template_id         text,
    status              text NOT NULL DEFAULT 'queued'
                        CHECK (status IN ('queued', 'sent', 'delivered', 'bounced', 'complained', 'failed')),
    warnings            text[] NOT NULL DEFAULT '{}',
    provider            text NOT NULL DEFAULT '',
    provider_message_id text,
    failure_reason      text,
    bounce_type         text,
    bounce_reason       text,
    complaint_type      text,
    claim_token         text,
    claimed_at          timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    sent_at             timestamptz,
    delivered_at        timestamptz,
    bounced_at          timestamptz,
    complained_at       timestamptz,
    failed_at           timestamptz,
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS transactional_messages_external
    ON transactional_messages (workspace_id, external_id) WHERE external_id IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS transactional_messages_rfc ON transactional_messages (rfc_message_id);
CREATE INDEX IF NOT EXISTS transactional_messages_seq ON transactional_messages (workspace_id, seq DESC);
CREATE INDEX IF NOT EXISTS transactional_messages_to ON transactional_messages (workspace_id, to_email, seq DESC);
CREATE INDEX IF NOT EXISTS transactional_messages_status ON transactional_messages (workspace_id, status, seq DESC);

-- Payloads too large for one broker message, by message id; deleted once the
-- message left the queued state.
CREATE TABLE IF NOT EXISTS transactional_payloads (
    message_id text PRIMARY KEY REFERENCES transactional_messages (id) ON DELETE CASCADE,
    payload    bytea NOT NULL
);
