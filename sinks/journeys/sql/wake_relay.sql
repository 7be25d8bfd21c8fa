-- One round of the wake relay (RelayWakes): claim up to $3 executions of
-- scope $1 whose wait is due by $2, earliest first, skipping those another
-- relay holds; clear their wake_scope (the caller publishes their wake-ups
-- before it commits, so a crash before the commit leaves them to the next
-- round) and return what their wake-up envelopes are made of.
UPDATE journey_executions e
   SET wake_scope = NULL
  FROM (SELECT id
          FROM journey_executions
         WHERE wake_scope = $1 AND next_wake_at IS NOT NULL AND state = 'active' AND next_wake_at <= $2
         ORDER BY next_wake_at
         LIMIT $3
           FOR UPDATE SKIP LOCKED) d
 WHERE e.id = d.id
RETURNING e.id, e.workspace_id, e.contact_id, e.position, e.next_wake_at
