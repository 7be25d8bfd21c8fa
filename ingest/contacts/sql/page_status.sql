-- One page of workspace $1's contacts of status $4, newest first: $2 rows
-- skipped, at most $3 returned; as page_all.sql, with the status's bucket
-- counts and the (workspace_id, status, seq) index. The first row carries
-- only total.
WITH b AS (
    SELECT bucket, n FROM contact_buckets WHERE workspace_id = $1 AND status = $4 AND n > 0
),
cum AS (
    SELECT bucket, n, sum(n) OVER (ORDER BY bucket DESC) - n AS before FROM b
),
start AS (
    SELECT bucket, before FROM cum WHERE before <= $2 AND before + n > $2
),
first AS (
    SELECT c.seq FROM contacts c
     WHERE c.workspace_id = $1 AND c.status = $4 AND c.seq < (SELECT (bucket + 1) << 10 FROM start)
     ORDER BY c.seq DESC
    OFFSET (SELECT $2 - before FROM start) LIMIT 1
)
SELECT (SELECT coalesce(sum(n), 0) FROM b)::bigint AS total,
       NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
       NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::timestamptz
UNION ALL
(SELECT NULL, c.id, c.email, c.first_name, c.country, c.language, c.status, c.source,
        c.metadata, c.custom_fields, c.created_at, c.updated_at
   FROM contacts c
  WHERE c.workspace_id = $1 AND c.status = $4 AND c.seq <= (SELECT seq FROM first)
  ORDER BY c.seq DESC
  LIMIT $3)
