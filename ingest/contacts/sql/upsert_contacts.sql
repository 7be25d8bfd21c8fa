-- Upsert a batch of contacts of workspace $1 (spec 2.1, 4.5), one statement.
-- Arrays of equal length, one element per contact, emails unique in the
-- batch: $2 id to use when created, $3 email, $4 firstName, $5 country,
-- $6 language (NULL keeps the current value), $7 customFields patch as JSON
-- text (a null value removes the key), $8 source and $9 metadata JSON
-- (creation only), $10 status at creation. $11 false leaves existing
-- contacts untouched and writes no outbox rows (list subscribe and sign-up
-- forms create only, and write all their events into the outbox themselves,
-- in the same transaction). $12 is the counter shard this statement bumps
-- (one per concurrent statement). $13 is each contact's request id (the
-- causation id of its event). $14 is the outbox scope (the topic prefix
-- whose relay publishes the rows, 0054_contact_outbox_scope.sql).
--
-- Runs after lock_for_create.sql in the same transaction. New rows get their
-- seq from the global contacts_seq. In a workspace with a contact limit they
-- are admitted in batch order while the limit allows (the total row is
-- locked and current); an admitted row that a concurrent transaction created
-- meanwhile is not inserted ("retry": the caller runs it again as an update).
-- Updates touch a row only when a value changes, and never touch status,
-- source or metadata. Every counter row the batch changes (total; per status
-- and '' per fine and coarse bucket) is bumped by one INSERT in key order at the end, so
-- concurrent batches lock counters in one order and only until they commit.
--
-- Every created or updated contact also gets its contact_outbox row (the
-- domain event, written in the same transaction; 0045_contact_outbox.sql):
-- the request id and the contact's fields in columns (metadata aside: it
-- never changes after creation and is read back from the contact when the
-- relay rebuilds the event; 0088_contact_outbox_columns.sql) and, for
-- updates, the values before the update in data ({"old": ...}, under the
-- JSON names of contacts.Contact).
--
-- One row per input, in any order: ord, outcome (created, updated,
-- unchanged, refused = over the contact limit, retry), the contact after the
-- statement and, for updates, the values before it, and the id of its
-- contact_outbox row (NULL when none was written).
WITH input AS (
    SELECT t.ord, t.new_id, t.email, t.first_name, t.country, t.language,
           t.custom_fields::jsonb AS custom_fields, t.source, t.metadata::jsonb AS metadata, t.status, t.rid
      FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                  $7::text[], $8::text[], $9::text[], $10::text[], $13::text[])
           WITH ORDINALITY AS t(new_id, email, first_name, country, language,
                                custom_fields, source, metadata, status, rid, ord)
),
existing AS (
    SELECT i.ord, c AS old
      FROM input i JOIN contacts c ON c.workspace_id = $1 AND c.email = i.email
),
lim AS (
    SELECT w.contact_limit,
           coalesce((SELECT sum(b.n) FROM contact_buckets b
                      WHERE b.workspace_id = $1 AND b.status = '' AND b.bucket = -1), 0) AS total
      FROM workspaces w
     WHERE w.id = $1
),
fresh AS (
    SELECT i.*, row_number() OVER (ORDER BY i.ord) AS rn
      FROM input i
     WHERE NOT EXISTS (SELECT 1 FROM existing e WHERE e.ord = i.ord)
),
admitted AS (
    SELECT f.*
      FROM fresh f CROSS JOIN lim
     WHERE lim.contact_limit = 0 OR lim.total + f.rn <= lim.contact_limit
),
ins AS (
    INSERT INTO contacts AS c (id, workspace_id, seq, email, first_name, country, language,
                               status, source, metadata, custom_fields)
    SELECT a.new_id, $1, nextval('contacts_seq'), a.email, a.first_name, a.country, a.language,
           a.status, a.source, a.metadata, jsonb_strip_nulls(coalesce(a.custom_fields, '{}'))
      FROM (SELECT * FROM admitted ORDER BY email) a
    ON CONFLICT (workspace_id, email) DO NOTHING
    RETURNING c
),
upd AS (
    UPDATE contacts c
       SET first_name    = coalesce(i.first_name, c.first_name),
           country       = coalesce(i.country, c.country),
           language      = coalesce(i.language, c.language),
           custom_fields = jsonb_strip_nulls(c.custom_fields || coalesce(i.custom_fields, '{}')),
           updated_at    = now()
      FROM input i
     WHERE c.workspace_id = $1 AND c.email = i.email
       AND $11::boolean
       AND EXISTS (SELECT 1 FROM existing e WHERE e.ord = i.ord)
       AND (c.first_name, c.country, c.language, c.custom_fields) IS DISTINCT FROM
           (coalesce(i.first_name, c.first_name), coalesce(i.country, c.country),
            coalesce(i.language, c.language),
            jsonb_strip_nulls(c.custom_fields || coalesce(i.custom_fields, '{}')))
    RETURNING c
),
counts AS (
    INSERT INTO contact_buckets AS b (workspace_id, status, bucket, shard, n)
    SELECT $1, k.status, k.bucket, $12::smallint, count(*)
      FROM ins x
           CROSS JOIN LATERAL (VALUES ((x.c).status, (x.c).seq >> 10), ('', (x.c).seq >> 10), ('', -1::bigint),
                                      ((x.c).status, -2 - ((x.c).seq >> 15)), ('', -2 - ((x.c).seq >> 15)))
           AS k(status, bucket)
     GROUP BY 2, 3
     ORDER BY 2, 3
    ON CONFLICT (workspace_id, status, bucket, shard) DO UPDATE SET n = b.n + EXCLUDED.n
),
res AS (
    SELECT i.ord,
           CASE WHEN (n.c).id IS NOT NULL THEN 'created'
                WHEN (u.c).id IS NOT NULL THEN 'updated'
                WHEN (e.old).id IS NOT NULL THEN 'unchanged'
                WHEN a.ord IS NULL THEN 'refused'
                ELSE 'retry' END AS outcome,
           coalesce(n.c, u.c, e.old) AS cur,
           e.old, i.rid
      FROM input i
      LEFT JOIN ins n ON (n.c).email = i.email
      LEFT JOIN upd u ON (u.c).email = i.email
      LEFT JOIN existing e ON e.ord = i.ord
      LEFT JOIN admitted a ON a.ord = i.ord
),
outbox AS (
    INSERT INTO contact_outbox (workspace_id, contact_id, kind, data, scope, rid, email, first_name,
                                country, language, status, source, custom_fields,
                                contact_created_at, contact_updated_at)
    SELECT $1, (r.cur).id, r.outcome,
           CASE WHEN r.outcome = 'updated' THEN jsonb_build_object('old', jsonb_build_object(
               'firstName', (r.old).first_name, 'country', (r.old).country,
               'language', (r.old).language, 'customFields', (r.old).custom_fields))
                ELSE '{}'::jsonb END,
           $14::text, r.rid, (r.cur).email, (r.cur).first_name, (r.cur).country, (r.cur).language,
           (r.cur).status, (r.cur).source, (r.cur).custom_fields, (r.cur).created_at, (r.cur).updated_at
      FROM res r
     WHERE r.outcome IN ('created', 'updated') AND $11::boolean
    RETURNING id, contact_id
)
SELECT ord, outcome,
       (cur).id, (cur).email, (cur).first_name, (cur).country, (cur).language, (cur).status,
       (cur).source, (cur).metadata, (cur).custom_fields, (cur).created_at, (cur).updated_at,
       (old).first_name, (old).country, (old).language, (old).custom_fields,
       o.id
  FROM res LEFT JOIN outbox o ON o.contact_id = (res.cur).id
