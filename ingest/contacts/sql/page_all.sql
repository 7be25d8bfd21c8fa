-- One page of workspace $1's contacts, newest first: $2 rows skipped, at most
-- $3 returned. contact_buckets (exact, same snapshot) says in which 1024-seq
-- bucket the page starts, so the scan skips at most a bucket's worth of
-- index entries at any depth. Always one row more than the page: the first
-- carries only total (id NULL when the page is empty).
WITH b AS (
    SELECT bucket, sum(n)::bigint AS n
      FROM contact_buckets WHERE workspace_id = $1
     GROUP BY bucket HAVING sum(n) > 0
),
cum AS (
    SELECT bucket, n, (sum(n) OVER (ORDER BY bucket DESC) - n)::bigint AS before FROM b
),
start AS (
    SELECT bucket, before FROM cum WHERE before <= $2 AND before + n > $2
)
SELECT (SELECT coalesce(sum(n), 0) FROM b)::bigint AS total,
       NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
       NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::timestamptz
UNION ALL
(SELECT NULL, c.id, c.email, c.first_name, c.country, c.language, c.status, c.source,
        c.metadata, c.custom_fields, c.created_at, c.updated_at
   FROM contacts c
  WHERE c.workspace_id = $1 AND c.seq < (SELECT (bucket + 1) << 10 FROM start)
  ORDER BY c.seq DESC
 OFFSET (SELECT $2 - before FROM start) LIMIT $3)
