-- The contacts outbox belongs to one deployment's topics (issue 24, item 6):
-- each row carries the topic prefix of the process that wrote it, and a
-- relay claims only rows of its own prefix. Deployments (or test runs) that
-- share a database but not their topics otherwise published each other's
-- events under the wrong prefix: a relay of one took the rows of another
-- once they were older than its grace period.
ALTER TABLE contact_outbox ADD COLUMN IF NOT EXISTS scope text NOT NULL DEFAULT '';
