-- Parallel contact creation. Creating contacts no longer takes a per-workspace
-- lock for the whole transaction (except in workspaces with a contact limit,
-- where the limit must be exact):
--  * seq comes from one global sequence (newest first = descending seq within
--    a workspace; values are unique, gaps are harmless);
--  * the workspace's contact total moves into contact_buckets as the row
--    (status '', bucket -1), so every counter a batch changes is bumped by one
--    ordered INSERT at the end of its statement: concurrent batches lock the
--    counters in the same order (no deadlocks) and only from that point to
--    their commit.
CREATE SEQUENCE IF NOT EXISTS contacts_seq;
SELECT setval('contacts_seq', greatest((SELECT max(seq) FROM contacts), 1));

INSERT INTO contact_buckets (workspace_id, status, bucket, n)
SELECT workspace_id, '', -1, total FROM contact_stats
ON CONFLICT (workspace_id, status, bucket) DO UPDATE SET n = EXCLUDED.n;
DROP TABLE IF EXISTS contact_stats;

CREATE OR REPLACE FUNCTION contacts_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE contact_buckets SET n = n - 1
     WHERE workspace_id = OLD.workspace_id
       AND ((status IN (OLD.status, '') AND bucket = OLD.seq >> 10) OR (status = '' AND bucket = -1));
    UPDATE lists l SET contact_count = l.contact_count - 1
      FROM memberships m WHERE m.contact_id = OLD.id AND l.id = m.list_id;
    UPDATE list_buckets lb SET n = lb.n - 1
      FROM memberships m
     WHERE m.contact_id = OLD.id AND lb.list_id = m.list_id
       AND lb.status IN (OLD.status, '') AND lb.bucket = OLD.seq >> 10;
    RETURN OLD;
END
$$;

-- Status changes bump their two counter rows (and the list rows) in key
-- order, the same order as creations, so they cannot deadlock with them.
CREATE OR REPLACE FUNCTION contacts_status_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_buckets AS b (workspace_id, status, bucket, n)
    SELECT NEW.workspace_id, v.status, NEW.seq >> 10, v.d
      FROM (VALUES (OLD.status, -1), (NEW.status, 1)) AS v(status, d)
     ORDER BY v.status
    ON CONFLICT (workspace_id, status, bucket) DO UPDATE SET n = b.n + EXCLUDED.n;

    UPDATE memberships SET contact_status = NEW.status WHERE contact_id = NEW.id;
    INSERT INTO list_buckets AS lb (list_id, status, bucket, n)
    SELECT m.list_id, v.status, NEW.seq >> 10, v.d
      FROM memberships m CROSS JOIN (VALUES (OLD.status, -1), (NEW.status, 1)) AS v(status, d)
     WHERE m.contact_id = NEW.id
     ORDER BY m.list_id, v.status
    ON CONFLICT (list_id, status, bucket) DO UPDATE SET n = lb.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

