-- Recompute every counter of workspace $1 from its rows, for data loaded
-- without the Store (COPY, restores). Statements are split on lines holding
-- only ";" and run in one transaction after locking the total row; the
-- global contacts_seq is moved past the workspace's highest seq.
INSERT INTO contact_buckets AS b (workspace_id, status, bucket, shard, n) VALUES ($1, '', -1, 0, 0)
ON CONFLICT (workspace_id, status, bucket, shard) DO UPDATE SET n = b.n
;
DELETE FROM contact_buckets WHERE workspace_id = $1 AND NOT (status = '' AND bucket = -1 AND shard = 0)
;
INSERT INTO contact_buckets (workspace_id, status, bucket, shard, n)
SELECT $1, coalesce(status, ''), seq >> 10, 0, count(*) FROM contacts WHERE workspace_id = $1
 GROUP BY GROUPING SETS ((status, seq >> 10), (seq >> 10))
;
INSERT INTO contact_buckets (workspace_id, status, bucket, shard, n)
SELECT $1, status, -2 - (bucket >> 5), 0, sum(n) FROM contact_buckets
 WHERE workspace_id = $1 AND bucket >= 0 GROUP BY status, bucket >> 5
;
UPDATE contact_buckets
   SET n = (SELECT count(*) FROM contacts WHERE workspace_id = $1)
 WHERE workspace_id = $1 AND status = '' AND bucket = -1 AND shard = 0
;
SELECT setval('contacts_seq', greatest((SELECT last_value FROM contacts_seq),
                                       (SELECT coalesce(max(seq), 1) FROM contacts WHERE workspace_id = $1)))
;
UPDATE lists l SET contact_count = (SELECT count(*) FROM memberships m WHERE m.list_id = l.id)
 WHERE l.workspace_id = $1
;
DELETE FROM list_buckets WHERE list_id IN (SELECT id FROM lists WHERE workspace_id = $1)
;
UPDATE memberships m SET contact_status = c.status
  FROM contacts c
 WHERE m.workspace_id = $1 AND c.id = m.contact_id AND m.contact_status IS DISTINCT FROM c.status
;
INSERT INTO list_buckets (list_id, status, bucket, n)
SELECT list_id, coalesce(contact_status, ''), contact_seq >> 10, count(*)
  FROM memberships
 WHERE workspace_id = $1
 GROUP BY GROUPING SETS ((list_id, contact_status, contact_seq >> 10), (list_id, contact_seq >> 10))
;
INSERT INTO list_buckets (list_id, status, bucket, n)
SELECT list_id, status, -2 - (bucket >> 5), sum(n) FROM list_buckets
 WHERE list_id IN (SELECT id FROM lists WHERE workspace_id = $1) AND bucket >= 0
 GROUP BY list_id, status, bucket >> 5
