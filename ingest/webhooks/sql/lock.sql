-- Serialises subscribes of one workspace for the rest of the transaction, so
-- the existence check and the insert agree.
SELECT pg_advisory_xact_lock(hashtextextended('webhook_subscriptions:' || $1, 0))
