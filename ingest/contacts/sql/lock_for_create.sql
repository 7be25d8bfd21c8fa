-- Step 1 of every statement batch that may create contacts. In a workspace
-- with a contact limit, when any of the emails ($2) is not a contact of
-- workspace $1 yet, lock the workspace's total row (contact_buckets '', -1,
-- shard 0; created when missing) until commit: creators in a limited workspace take
-- turns here, which makes the admission of upsert_contacts.sql exact across
-- processes. Unlimited workspaces and pure updates take no lock here.
INSERT INTO contact_buckets AS b (workspace_id, status, bucket, shard, n)
SELECT $1::text, '', -1, 0, 0
 WHERE (SELECT contact_limit FROM workspaces WHERE id = $1) > 0
   AND EXISTS (
       SELECT 1 FROM unnest($2::text[]) AS e(email)
        WHERE NOT EXISTS (SELECT 1 FROM contacts c WHERE c.workspace_id = $1 AND c.email = e.email))
ON CONFLICT (workspace_id, status, bucket, shard) DO UPDATE SET n = b.n
