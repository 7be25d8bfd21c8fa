-- One round of the wake relay (RelayWakes): claim up to $3 wake-ups of
-- scope $1 due by $2, earliest first, skipping those another relay holds,
-- and delete them (the caller publishes them before it commits, so a crash
-- before the commit leaves them to the next round). Returns each with what
-- its wake-up envelope is made of and whether it is live: its execution
-- is still active and waiting at that position for that time. One that is
-- not (it moved on another way, ended, or is gone) is deleted unpublished.
WITH due AS (
    SELECT ctid
      FROM journey_wakes
     WHERE scope = $1 AND due_at <= $2
     ORDER BY due_at
     LIMIT $3
       FOR UPDATE SKIP LOCKED
), claimed AS (
    -- By the claimed rows' addresses: a join with due was planned, in the
    -- generic plan, as a hash join over the whole table.
    DELETE FROM journey_wakes w
     WHERE w.ctid = ANY (ARRAY(SELECT ctid FROM due))
    RETURNING w.execution_id, w.position, w.due_at
)
SELECT c.execution_id, coalesce(e.workspace_id, ''), coalesce(e.contact_id, ''), c.position, c.due_at,
       coalesce(e.state = 'active' AND e.position = c.position AND e.next_wake_at = c.due_at, false)
  FROM claimed c
  LEFT JOIN journey_executions e ON e.id = c.execution_id
