-- Claim up to $2 contact_outbox rows older than $1 seconds for the relay,
-- oldest first, locked until the relay's transaction ends; rows another
-- relay holds are skipped. With each contact upsert row (kind created or
-- updated), the contact's metadata (not kept in the outbox: it never
-- changes after creation) and the columns holding the contact as written
-- (NULL email: a row written before 0088 holds it in data); rows of kind
-- envelope hold their whole envelope.
-- $3 limits the claim to one workspace's rows ('' for all: the relay; one
-- workspace: tests sharing the database). $4 is the relay's scope (its topic
-- prefix): rows another deployment's processes wrote are never its own.
SELECT o.id, o.workspace_id, o.kind, o.data, c.metadata,
       o.contact_id, o.rid, o.email, o.first_name, o.country, o.language, o.status, o.source,
       o.custom_fields, o.contact_created_at, o.contact_updated_at
  FROM (SELECT * FROM contact_outbox
         WHERE created_at < now() - make_interval(secs => $1::float8)
           AND ($3::text = '' OR workspace_id = $3)
           AND scope = $4::text
         ORDER BY id
         LIMIT $2
           FOR UPDATE SKIP LOCKED) o
  LEFT JOIN contacts c ON c.id = o.contact_id AND o.kind <> 'envelope'
 ORDER BY o.id
