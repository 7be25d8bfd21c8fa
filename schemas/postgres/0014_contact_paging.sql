-- Cheaper pages at any depth (GET /v1/contacts):
--  * the counters become integer (sum(int) accumulates in bigint, not
--    numeric);
--  * contact_buckets and list_buckets also keep a status '' row per bucket
--    counting every status, so an unfiltered page reads one row per bucket;
--  * memberships carry the contact's status (kept by the trigger below), so a
--    list page filtered by status skips rows with an index-only scan.

ALTER TABLE contact_buckets ALTER COLUMN n TYPE integer;
ALTER TABLE list_buckets ALTER COLUMN n TYPE integer;

INSERT INTO contact_buckets (workspace_id, status, bucket, n)
SELECT workspace_id, '', bucket, sum(n) FROM contact_buckets WHERE status <> '' GROUP BY 1, 3
ON CONFLICT (workspace_id, status, bucket) DO UPDATE SET n = EXCLUDED.n;
INSERT INTO list_buckets (list_id, status, bucket, n)
SELECT list_id, '', bucket, sum(n) FROM list_buckets WHERE status <> '' GROUP BY 1, 3
ON CONFLICT (list_id, status, bucket) DO UPDATE SET n = EXCLUDED.n;

ALTER TABLE memberships ADD COLUMN IF NOT EXISTS contact_status text;
UPDATE memberships m SET contact_status = c.status FROM contacts c WHERE c.id = m.contact_id AND m.contact_status IS NULL;
ALTER TABLE memberships ALTER COLUMN contact_status SET NOT NULL;
CREATE INDEX IF NOT EXISTS memberships_list_status_seq ON memberships (list_id, contact_status, contact_seq DESC);

-- Status changes move the per-status counts ('' rows do not change) and
-- the memberships' copy of the status.
CREATE OR REPLACE FUNCTION contacts_status_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE contact_buckets SET n = n - 1
     WHERE workspace_id = OLD.workspace_id AND status = OLD.status AND bucket = OLD.seq >> 10;
    INSERT INTO contact_buckets AS b (workspace_id, status, bucket, n)
    VALUES (NEW.workspace_id, NEW.status, NEW.seq >> 10, 1)
    ON CONFLICT (workspace_id, status, bucket) DO UPDATE SET n = b.n + 1;

    UPDATE memberships SET contact_status = NEW.status WHERE contact_id = NEW.id;
    UPDATE list_buckets lb SET n = lb.n - 1
      FROM memberships m
     WHERE m.contact_id = OLD.id AND lb.list_id = m.list_id
       AND lb.status = OLD.status AND lb.bucket = OLD.seq >> 10;
    INSERT INTO list_buckets AS lb (list_id, status, bucket, n)
    SELECT m.list_id, NEW.status, NEW.seq >> 10, 1 FROM memberships m WHERE m.contact_id = NEW.id
    ON CONFLICT (list_id, status, bucket) DO UPDATE SET n = lb.n + 1;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION contacts_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE contact_buckets SET n = n - 1
     WHERE workspace_id = OLD.workspace_id AND status IN (OLD.status, '') AND bucket = OLD.seq >> 10;
    UPDATE contact_stats SET total = total - 1 WHERE workspace_id = OLD.workspace_id;
    UPDATE lists l SET contact_count = l.contact_count - 1
      FROM memberships m WHERE m.contact_id = OLD.id AND l.id = m.list_id;
    UPDATE list_buckets lb SET n = lb.n - 1
      FROM memberships m
     WHERE m.contact_id = OLD.id AND lb.list_id = m.list_id
       AND lb.status IN (OLD.status, '') AND lb.bucket = OLD.seq >> 10;
    RETURN OLD;
END
$$;
