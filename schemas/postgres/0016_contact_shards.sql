-- Counter rows are sharded: each of a process's concurrent statements in a
-- workspace bumps its own shard, so they never wait for each other's commit
-- on a counter row. Readers sum the shards. Triggers and recounts use shard 0.
ALTER TABLE contact_buckets ADD COLUMN IF NOT EXISTS shard smallint NOT NULL DEFAULT 0;
ALTER TABLE contact_buckets DROP CONSTRAINT IF EXISTS contact_buckets_pkey;
ALTER TABLE contact_buckets ADD CONSTRAINT contact_buckets_pkey PRIMARY KEY (workspace_id, status, bucket, shard);

CREATE OR REPLACE FUNCTION contacts_status_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_buckets AS b (workspace_id, status, bucket, shard, n)
    SELECT NEW.workspace_id, v.status, NEW.seq >> 10, 0, v.d
      FROM (VALUES (OLD.status, -1), (NEW.status, 1)) AS v(status, d)
     ORDER BY v.status
    ON CONFLICT (workspace_id, status, bucket, shard) DO UPDATE SET n = b.n + EXCLUDED.n;

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

CREATE OR REPLACE FUNCTION contacts_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_buckets AS b (workspace_id, status, bucket, shard, n)
    SELECT OLD.workspace_id, v.status, v.bucket, 0, -1
      FROM (VALUES ('', -1::bigint), ('', OLD.seq >> 10), (OLD.status, OLD.seq >> 10)) AS v(status, bucket)
     ORDER BY v.status, v.bucket
    ON CONFLICT (workspace_id, status, bucket, shard) DO UPDATE SET n = b.n + EXCLUDED.n;
    UPDATE lists l SET contact_count = l.contact_count - 1
      FROM memberships m WHERE m.contact_id = OLD.id AND l.id = m.list_id;
    UPDATE list_buckets lb SET n = lb.n - 1
      FROM memberships m
     WHERE m.contact_id = OLD.id AND lb.list_id = m.list_id
       AND lb.status IN (OLD.status, '') AND lb.bucket = OLD.seq >> 10;
    RETURN OLD;
END
$$;
