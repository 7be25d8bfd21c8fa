-- Put the contact ($3 email or $4 id) of workspace $1 on list $2 with target
-- status $5 (spec 3.2). ACTIVE (subscribe, forms of lists without double
-- opt-in): none, UNSUBSCRIBED or PENDING becomes ACTIVE. PENDING (forms of
-- double opt-in lists): none or UNSUBSCRIBED becomes PENDING. An ACTIVE
-- membership never moves. A new membership row bumps the list's
-- contact_count and list_buckets (its contact status and '') in the same
-- statement.
--
-- One row when the contact exists: the contact, the membership status before
-- (NULL for none) and after, and whether the row changed. No row otherwise.
WITH c AS (
    -- FOR SHARE: a concurrent status change waits (or is seen), so the
    -- copied status and the per-status counts below stay exact.
    SELECT * FROM contacts WHERE workspace_id = $1 AND (email = $3 OR id = $4)
       FOR SHARE
),
prev AS (
    SELECT m.status FROM memberships m JOIN c ON m.contact_id = c.id WHERE m.list_id = $2
),
up AS (
    INSERT INTO memberships AS m (list_id, contact_id, workspace_id, contact_seq, contact_status, status)
    SELECT $2, c.id, $1, c.seq, c.status, $5 FROM c
    ON CONFLICT (list_id, contact_id) DO UPDATE
       SET status = EXCLUDED.status, updated_at = now()
     WHERE m.status <> 'ACTIVE' AND m.status <> EXCLUDED.status
    RETURNING (xmax = 0) AS inserted, m.status
),
bump_list AS (
    UPDATE lists SET contact_count = contact_count + 1
     WHERE id = $2 AND EXISTS (SELECT 1 FROM up WHERE inserted)
),
bump_buckets AS (
    INSERT INTO list_buckets AS b (list_id, status, bucket, n)
    SELECT $2, v.status, k.bucket, 1
      FROM c CROSS JOIN LATERAL (VALUES (c.status), ('')) AS v(status)
             CROSS JOIN LATERAL (VALUES (c.seq >> 10), (-2 - (c.seq >> 15))) AS k(bucket)
     WHERE EXISTS (SELECT 1 FROM up WHERE inserted)
     ORDER BY v.status, k.bucket
    ON CONFLICT (list_id, status, bucket) DO UPDATE SET n = b.n + 1
)
SELECT c.id, c.email, c.first_name, c.country, c.language, c.status, c.source,
       c.metadata, c.custom_fields, c.created_at, c.updated_at,
       (SELECT status FROM prev) AS previous,
       coalesce((SELECT status FROM up), (SELECT status FROM prev)) AS current,
       EXISTS (SELECT 1 FROM up) AS changed
  FROM c
