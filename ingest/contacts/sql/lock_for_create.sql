-- Step 1 of every statement batch that may create contacts: when any of the
-- emails ($2) is not a contact of workspace $1 yet, lock (creating it if
-- needed) the workspace's contact_stats row until commit. Creators in one
-- workspace thus take their turn here first, which makes the plan limit
-- check and the seq allocation of the next statement exact across processes
-- and gives every transaction the same lock order. Pure updates skip it.
INSERT INTO contact_stats AS s (workspace_id)
SELECT $1::text
 WHERE EXISTS (
       SELECT 1 FROM unnest($2::text[]) AS e(email)
        WHERE NOT EXISTS (SELECT 1 FROM contacts c WHERE c.workspace_id = $1 AND c.email = e.email))
ON CONFLICT (workspace_id) DO UPDATE SET total = s.total
