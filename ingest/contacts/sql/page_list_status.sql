-- One page of the members of list $1 whose contact status is $4
-- (memberships keep a copy of it), newest contact first: $2 rows skipped, at
-- most $3 returned; as page_list.sql, with the status's bucket counts and the
-- (list_id, contact_status, contact_seq) index. The first row carries only
-- total.
WITH cum AS (
    -- In bucket order straight from the primary key: no sort.
    SELECT bucket, n, sum(n) OVER (ORDER BY bucket DESC ROWS UNBOUNDED PRECEDING) AS upto
      FROM list_buckets WHERE list_id = $1 AND status = $4 AND n > 0
),
start AS (
    SELECT bucket, upto - n AS before FROM cum WHERE upto > $2 ORDER BY bucket DESC LIMIT 1
),
first AS (
    SELECT m.contact_seq FROM memberships m
     WHERE m.list_id = $1 AND m.contact_status = $4 AND m.contact_seq < (SELECT (bucket + 1) << 10 FROM start)
     ORDER BY m.contact_seq DESC
    OFFSET (SELECT $2 - before FROM start) LIMIT 1
)
SELECT (SELECT coalesce(max(upto), 0) FROM cum)::bigint AS total,
       NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
       NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::timestamptz
UNION ALL
(SELECT NULL, c.id, c.email, c.first_name, c.country, c.language, c.status, c.source,
        c.metadata, c.custom_fields, c.created_at, c.updated_at
   FROM memberships m JOIN contacts c ON c.id = m.contact_id
  WHERE m.list_id = $1 AND m.contact_status = $4 AND m.contact_seq <= (SELECT contact_seq FROM first)
  ORDER BY m.contact_seq DESC
  LIMIT $3)
