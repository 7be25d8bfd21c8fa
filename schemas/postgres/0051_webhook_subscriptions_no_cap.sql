-- REST hook target URLs have no length limit (the spec sets none), so the
-- unique key compares a digest of the URL: a btree entry holds at most about
-- 2.7 kB, and a longer URL failed the insert. find.sql compares the URL
-- itself beside the digest, so a digest collision cannot join two URLs.
ALTER TABLE webhook_subscriptions DROP CONSTRAINT IF EXISTS webhook_subscriptions_unique;
CREATE UNIQUE INDEX IF NOT EXISTS webhook_subscriptions_target
    ON webhook_subscriptions (workspace_id, event, md5(target_url));
