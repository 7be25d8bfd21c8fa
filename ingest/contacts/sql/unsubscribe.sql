-- Unsubscribe the contact ($3 email or $4 id) of workspace $1 from list $2
-- (spec 3.2): an ACTIVE or PENDING membership becomes UNSUBSCRIBED, the row
-- is kept; the contact and its other lists are untouched. One row when the
-- contact exists: id, email, whether a membership changed.
WITH c AS (
    SELECT id, email FROM contacts WHERE workspace_id = $1 AND email = $3
    UNION ALL
    SELECT id, email FROM contacts WHERE workspace_id = $1 AND id = $4
),
up AS (
    UPDATE memberships m SET status = 'UNSUBSCRIBED', updated_at = now()
      FROM c
     WHERE m.list_id = $2 AND m.contact_id = c.id AND m.status <> 'UNSUBSCRIBED'
    RETURNING m.contact_id
)
SELECT c.id, c.email, EXISTS (SELECT 1 FROM up) FROM c
