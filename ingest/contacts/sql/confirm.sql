-- A double opt-in click for contact $2 of workspace $1 (spec 3.2): every
-- PENDING membership of the contact becomes ACTIVE at once, and the contact
-- itself goes from PENDING to ACTIVE. One row when the contact exists: its
-- email, whether the contact was activated, and the lists activated as JSON
-- [{id, name, confirmedAt}] (empty when nothing was pending: a second click).
WITH act AS (
    UPDATE memberships m SET status = 'ACTIVE', confirmed_at = now(), updated_at = now()
     WHERE m.contact_id = $2 AND m.workspace_id = $1 AND m.status = 'PENDING'
    RETURNING m.list_id, m.confirmed_at
),
con AS (
    UPDATE contacts c SET status = 'ACTIVE', updated_at = now()
     WHERE c.id = $2 AND c.workspace_id = $1 AND c.status = 'PENDING'
    RETURNING c.id
)
SELECT c.email,
       EXISTS (SELECT 1 FROM con) AS contact_confirmed,
       coalesce((SELECT json_agg(json_build_object('id', l.id, 'name', l.name, 'confirmedAt', act.confirmed_at)
                                 ORDER BY l.created_at, l.id)
                   FROM act JOIN lists l ON l.id = act.list_id), '[]'::json) AS lists
  FROM contacts c
 WHERE c.id = $2 AND c.workspace_id = $1
