-- One page of the members of list $1 whose contact status is $4
-- (memberships keep a copy of it), newest contact first: $2 rows skipped, at
-- most $3 returned; as page_list.sql, with the status's bucket counts and the
-- (list_id, contact_status, contact_seq) index. The first row carries only
-- total.
WITH coarse AS (
    -- 32768-wide counts (bucket = -2 - (seq >> 15)), newest first straight
    -- from the primary key, shards summed.
    SELECT -2 - bucket AS cb, n, sum(n) OVER (ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS upto
      FROM (SELECT bucket, sum(n)::int AS n FROM list_buckets
             WHERE list_id = $1 AND status = $4 AND bucket <= -2
             GROUP BY bucket HAVING sum(n) > 0) g
),
cstart AS (
    SELECT cb, upto - n AS before FROM coarse WHERE upto > $2 ORDER BY cb DESC LIMIT 1
),
cum AS (
    -- The 32 fine (1024-wide) counts inside the coarse bucket of the page.
    SELECT bucket, n, (SELECT before FROM cstart) + sum(n) OVER (ORDER BY bucket DESC ROWS UNBOUNDED PRECEDING) AS upto
      FROM (SELECT bucket, sum(n)::int AS n FROM list_buckets
             WHERE list_id = $1 AND status = $4
               AND bucket >= (SELECT cb FROM cstart) << 5 AND bucket < ((SELECT cb FROM cstart) + 1) << 5
             GROUP BY bucket HAVING sum(n) > 0) g
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
SELECT (SELECT coalesce(max(upto), 0) FROM coarse)::bigint AS total,
       NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
       NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::timestamptz
UNION ALL
(SELECT NULL, c.id, c.email, c.first_name, c.country, c.language, c.status, c.source,
        c.metadata, c.custom_fields, c.created_at, c.updated_at
   FROM memberships m JOIN contacts c ON c.id = m.contact_id
  WHERE m.list_id = $1 AND m.contact_status = $4 AND m.contact_seq <= (SELECT contact_seq FROM first)
  ORDER BY m.contact_seq DESC
  LIMIT $3)
