-- One-click unsubscribe of $2 in workspace $1 (from message $3): suppress the
-- address for marketing and mark the contact UNSUBSCRIBED. Returns the
-- workspace name (NULL when the workspace is gone), and the contact's id and
-- the time of the change when this statement moved it to UNSUBSCRIBED (NULL
-- when there is no such contact or it was not ACTIVE or PENDING: a repeat
-- changes nothing).
WITH sup AS (
    INSERT INTO suppressions (workspace_id, email, reason, message_id)
    SELECT $1, $2, 'unsubscribed', nullif($3, '')
     WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = $1)
    ON CONFLICT (workspace_id, email, reason) DO NOTHING
),
c AS (
    UPDATE contacts SET status = 'UNSUBSCRIBED', updated_at = now()
     WHERE workspace_id = $1 AND email = $2 AND status IN ('ACTIVE', 'PENDING')
    RETURNING id, updated_at
)
SELECT (SELECT name FROM workspaces WHERE id = $1), (SELECT id FROM c), (SELECT updated_at FROM c)
