-- One page of workspace $1's contacts, newest first: $2 rows skipped, at most
-- $3 returned. The counts of contact_buckets (exact, same snapshot; status ''
-- counts every status) locate the page's start: first the 32768-wide bucket,
-- then the 1024-wide one inside it; an index-only scan skips the rest of the
-- offset (at most ~1024 entries) to the page's first seq, and the page is
-- read from there. The cost does not grow with the depth. The first row
-- carries only total.
WITH coarse AS (
    -- 32768-wide counts (bucket = -2 - (seq >> 15)), newest first straight
    -- from the primary key, shards summed.
    SELECT -2 - bucket AS cb, n, sum(n) OVER (ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS upto
      FROM (SELECT bucket, sum(n)::int AS n FROM contact_buckets
             WHERE workspace_id = $1 AND status = '' AND bucket <= -2
             GROUP BY bucket HAVING sum(n) > 0) g
),
cstart AS (
    SELECT cb, upto - n AS before FROM coarse WHERE upto > $2 ORDER BY cb DESC LIMIT 1
),
cum AS (
    -- The 32 fine (1024-wide) counts inside the coarse bucket of the page.
    SELECT bucket, n, (SELECT before FROM cstart) + sum(n) OVER (ORDER BY bucket DESC ROWS UNBOUNDED PRECEDING) AS upto
      FROM (SELECT bucket, sum(n)::int AS n FROM contact_buckets
             WHERE workspace_id = $1 AND status = ''
               AND bucket >= (SELECT cb FROM cstart) << 5 AND bucket < ((SELECT cb FROM cstart) + 1) << 5
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
SELECT (SELECT coalesce(max(upto), 0) FROM coarse)::bigint AS total,
       NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
       NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::timestamptz
UNION ALL
(SELECT NULL, c.id, c.email, c.first_name, c.country, c.language, c.status, c.source,
        c.metadata, c.custom_fields, c.created_at, c.updated_at
   FROM contacts c
  WHERE c.workspace_id = $1 AND c.seq <= (SELECT seq FROM first)
  ORDER BY c.seq DESC
  LIMIT $3)
