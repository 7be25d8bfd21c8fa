-- One page of workspace $1's contacts, newest first: $2 rows skipped, at most
-- $3 returned. contact_buckets (exact, same snapshot; status '' counts every
-- status) says in which 1024-seq bucket the page starts; an index-only scan
-- skips the rest of the offset inside it (at most ~1024 entries) to the
-- page's first seq, and the page is read from there. So the cost does not
-- grow with the depth. The first row carries only total.
WITH cum AS (
    -- Shards summed per bucket, in bucket order straight from the primary
    -- key: no sort.
    SELECT bucket, n, sum(n) OVER (ORDER BY bucket DESC ROWS UNBOUNDED PRECEDING) AS upto
      FROM (SELECT bucket, sum(n)::int AS n FROM contact_buckets
             WHERE workspace_id = $1 AND status = '' AND bucket >= 0
             GROUP BY bucket HAVING sum(n) > 0) g
),
start AS (
    SELECT bucket, upto - n AS before FROM cum WHERE upto > $2 ORDER BY bucket DESC LIMIT 1
),
first AS (
    SELECT c.seq FROM contacts c
     WHERE c.workspace_id = $1 AND c.seq < (SELECT (bucket + 1) << 10 FROM start)
     ORDER BY c.seq DESC
    OFFSET (SELECT $2 - before FROM start) LIMIT 1
)
SELECT (SELECT coalesce(max(upto), 0) FROM cum)::bigint AS total,
       NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
       NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::timestamptz
UNION ALL
(SELECT NULL, c.id, c.email, c.first_name, c.country, c.language, c.status, c.source,
        c.metadata, c.custom_fields, c.created_at, c.updated_at
   FROM contacts c
  WHERE c.workspace_id = $1 AND c.seq <= (SELECT seq FROM first)
  ORDER BY c.seq DESC
  LIMIT $3)
