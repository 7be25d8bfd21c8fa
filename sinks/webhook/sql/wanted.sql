-- Which of the webhook event names $2 some target of workspace $1 wants:
-- a REST hook subscription to it or an enabled endpoint listing it (the
-- targets the fan-out would find: subscriptions_matching.sql and
-- endpoint_for.sql). Served by webhook_subscriptions_target and
-- webhook_endpoints_workspace.
SELECT e
  FROM unnest($2::text[]) AS e
 WHERE EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.workspace_id = $1 AND s.event = e)
    OR EXISTS (SELECT 1 FROM webhook_endpoints p WHERE p.workspace_id = $1 AND p.enabled AND e = ANY (p.events))
