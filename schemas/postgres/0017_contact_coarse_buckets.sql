-- Two-level page counts. Besides the 1024-wide buckets (bucket = seq >> 10),
-- contact_buckets and list_buckets keep 32768-wide ones under negative keys:
-- bucket = -2 - (seq >> 15) (-1 stays the workspace total). A page reads the
-- coarse rows (one per 32768 contacts), then only the 32 fine rows inside the
-- coarse bucket where it starts: ~60 rows at a million contacts instead of
-- ~1000.
INSERT INTO contact_buckets AS b (workspace_id, status, bucket, shard, n)
SELECT workspace_id, status, -2 - (bucket >> 5), shard, sum(n)
  FROM contact_buckets WHERE bucket >= 0 GROUP BY 1, 2, 3, 4
ON CONFLICT (workspace_id, status, bucket, shard) DO UPDATE SET n = EXCLUDED.n;
INSERT INTO list_buckets AS b (list_id, status, bucket, n)
SELECT list_id, status, -2 - (bucket >> 5), sum(n)
  FROM list_buckets WHERE bucket >= 0 GROUP BY 1, 2, 3
ON CONFLICT (list_id, status, bucket) DO UPDATE SET n = EXCLUDED.n;

CREATE OR REPLACE FUNCTION contacts_status_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_buckets AS b (workspace_id, status, bucket, shard, n)
    SELECT NEW.workspace_id, v.status, k.bucket, 0, v.d
      FROM (VALUES (OLD.status, -1), (NEW.status, 1)) AS v(status, d)
           CROSS JOIN (VALUES (NEW.seq >> 10), (-2 - (NEW.seq >> 15))) AS k(bucket)
     ORDER BY v.status, k.bucket
    ON CONFLICT (workspace_id, status, bucket, shard) DO UPDATE SET n = b.n + EXCLUDED.n;

    UPDATE memberships SET contact_status = NEW.status WHERE contact_id = NEW.id;
    INSERT INTO list_buckets AS lb (list_id, status, bucket, n)
    SELECT m.list_id, v.status, k.bucket, v.d
      FROM memberships m
           CROSS JOIN (VALUES (OLD.status, -1), (NEW.status, 1)) AS v(status, d)
           CROSS JOIN (VALUES (NEW.seq >> 10), (-2 - (NEW.seq >> 15))) AS k(bucket)
     WHERE m.contact_id = NEW.id
     ORDER BY m.list_id, v.status, k.bucket
    ON CONFLICT (list_id, status, bucket) DO UPDATE SET n = lb.n + EXCLUDED.n;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION contacts_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_buckets AS b (workspace_id, status, bucket, shard, n)
    SELECT OLD.workspace_id, v.status, v.bucket, 0, -1
      FROM (VALUES ('', -1::bigint), ('', OLD.seq >> 10), (OLD.status, OLD.seq >> 10),
                   ('', -2 - (OLD.seq >> 15)), (OLD.status, -2 - (OLD.seq >> 15))) AS v(status, bucket)
     ORDER BY v.status, v.bucket
    ON CONFLICT (workspace_id, status, bucket, shard) DO UPDATE SET n = b.n + EXCLUDED.n;
    UPDATE lists l SET contact_count = l.contact_count - 1
      FROM memberships m WHERE m.contact_id = OLD.id AND l.id = m.list_id;
    INSERT INTO list_buckets AS lb (list_id, status, bucket, n)
    SELECT m.list_id, v.status, k.bucket, -1
      FROM memberships m
           CROSS JOIN (VALUES (''), (OLD.status)) AS v(status)
           CROSS JOIN (VALUES (OLD.seq >> 10), (-2 - (OLD.seq >> 15))) AS k(bucket)
     WHERE m.contact_id = OLD.id
     ORDER BY m.list_id, v.status, k.bucket
    ON CONFLICT (list_id, status, bucket) DO UPDATE SET n = lb.n + EXCLUDED.n;
    RETURN OLD;
END
$$;
