-- Subscription lists and memberships (spec 2.2, 3.2). A membership row is
-- kept when unsubscribed so the opt-out is remembered. contact_count counts
-- every membership (pending and unsubscribed too) and is maintained in the
-- same transaction as the membership insert. list_buckets counts memberships
-- per (list, contact status, contact seq >> 10) for GET /v1/contacts?listId=
-- at any page depth, like contact_buckets.

CREATE TABLE IF NOT EXISTS lists (
    id            text PRIMARY KEY,
    workspace_id  text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    double_opt_in boolean NOT NULL DEFAULT false,
    contact_count bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS lists_workspace ON lists (workspace_id, created_at, id);

CREATE TABLE IF NOT EXISTS memberships (
    list_id      text NOT NULL REFERENCES lists (id) ON DELETE CASCADE,
    contact_id   text NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    workspace_id text NOT NULL,
    -- The contact's seq, copied (it never changes) so a list's members sort
    -- newest contact first straight from the index.
    contact_seq  bigint NOT NULL,
    status       text NOT NULL CHECK (status IN ('ACTIVE', 'UNSUBSCRIBED', 'PENDING')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    confirmed_at timestamptz,
    PRIMARY KEY (list_id, contact_id)
);
CREATE UNIQUE INDEX IF NOT EXISTS memberships_list_seq ON memberships (list_id, contact_seq DESC);
CREATE INDEX IF NOT EXISTS memberships_contact ON memberships (contact_id);

CREATE TABLE IF NOT EXISTS list_buckets (
    list_id text   NOT NULL,
    status  text   NOT NULL, -- the contact's status
    bucket  bigint NOT NULL, -- contact seq >> 10
    n       bigint NOT NULL,
    PRIMARY KEY (list_id, status, bucket)
);
