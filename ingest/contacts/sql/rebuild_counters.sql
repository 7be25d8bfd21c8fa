-- Recompute every counter of workspace $1 from its rows, for data loaded
-- without the Store (COPY, restores). Statements are split on lines holding
-- only ";" and run in one transaction after locking contact_stats.
INSERT INTO contact_stats AS s (workspace_id) VALUES ($1)
ON CONFLICT (workspace_id) DO UPDATE SET total = s.total
;
DELETE FROM contact_buckets WHERE workspace_id = $1
;
INSERT INTO contact_buckets (workspace_id, status, bucket, n)
SELECT $1, coalesce(status, ''), seq >> 10, count(*) FROM contacts WHERE workspace_id = $1
 GROUP BY GROUPING SETS ((status, seq >> 10), (seq >> 10))
;
UPDATE contact_stats s
   SET total = x.total, last_seq = greatest(s.last_seq, x.last_seq)
  FROM (SELECT count(*) AS total, coalesce(max(seq), 0) AS last_seq FROM contacts WHERE workspace_id = $1) x
 WHERE s.workspace_id = $1
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
