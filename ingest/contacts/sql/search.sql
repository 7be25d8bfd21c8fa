-- The contact $2 of workspace $1 with every membership as JSON
-- [{id, name, status, createdAt, updatedAt, confirmedAt}], oldest first.
SELECT c.id, c.email, c.first_name, c.country, c.language, c.status, c.source,
       c.metadata, c.custom_fields, c.created_at, c.updated_at,
       coalesce((SELECT json_agg(json_build_object(
                        'id', l.id, 'name', l.name, 'status', m.status, 'createdAt', m.created_at,
                        'updatedAt', m.updated_at, 'confirmedAt', m.confirmed_at)
                        ORDER BY m.created_at, l.id)
                   FROM memberships m JOIN lists l ON l.id = m.list_id
                  WHERE m.contact_id = c.id), '[]'::json)
  FROM contacts c
 WHERE c.workspace_id = $1 AND c.email = $2
