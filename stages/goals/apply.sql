-- Apply one flush of matched events to contact_activity in one statement
-- (so atomically): arrays of equal length, one element per distinct event:
-- $1 event id, $2 workspace, $3 contact id, $4 goal type ('' for a plain
-- event), $5 value as decimal text ('' when none), $6 occurred at.
--
-- Goals are counted exactly once: the ledger insert and the aggregate update
-- commit together, and only events the ledger did not hold yet (`fresh`)
-- change the sums. last_activity_at uses greatest(), which is idempotent, so
-- plain events need no ledger entry. Contacts deleted meanwhile are skipped.
-- Rows are upserted in contact id order, so concurrent flushes lock alike.
WITH ev AS (
    SELECT t.event_id, t.ws, t.contact_id, t.goal_type,
           nullif(t.value, '')::numeric AS value, t.occurred_at
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
           AS t(event_id, ws, contact_id, goal_type, value, occurred_at)
),
fresh AS (
    INSERT INTO event_ledger (event_id, workspace_id, contact_id)
    SELECT e.event_id, e.ws, e.contact_id FROM ev e WHERE e.goal_type <> ''
    ON CONFLICT (event_id) DO NOTHING
    RETURNING event_id
),
flagged AS MATERIALIZED (
    -- Whether each event is new to the ledger, as a hashed IN: a join with
    -- fresh was planned as a nested loop (unnest is estimated at 10 rows),
    -- n² comparisons that took 10 s for a 6,000-event flush. MATERIALIZED
    -- computes it once per event: inlined, the IN was copied into each of
    -- per_contact's five FILTERs (auto_explain: 2.6 s for a 22,000-event
    -- flush; 1.36 s against 0.84 s materialized for 20,000 events).
    --
    -- The contact check is a scalar subquery, so one primary-key probe per
    -- event: as EXISTS it was planned as a hash semi-join over a seq scan
    -- of every contact (0.6 s of a 1.3 s flush of 17,000 events against
    -- 1,000,000 contacts; 0.6 s in all once written this way).
    SELECT e.*, e.event_id IN (SELECT event_id FROM fresh) AS is_fresh
      FROM ev e
     WHERE (SELECT true FROM contacts c WHERE c.id = e.contact_id AND c.workspace_id = e.ws)
),
per_contact AS (
    SELECT e.contact_id,
           min(e.ws) AS ws,
           max(e.occurred_at) AS last_at,
           count(*) FILTER (WHERE e.is_fresh) AS goals,
           coalesce(sum(e.value) FILTER (WHERE e.is_fresh), 0) AS ltv,
           count(*) FILTER (WHERE e.is_fresh AND e.goal_type = 'purchase' AND e.value > 0) AS purchases,
           count(*) FILTER (WHERE e.is_fresh AND e.value < 0) AS refunds,
           max(e.occurred_at) FILTER (WHERE e.is_fresh AND e.goal_type = 'purchase' AND e.value > 0) AS last_purchase
      FROM flagged e
     GROUP BY e.contact_id
)
INSERT INTO contact_activity AS a (contact_id, workspace_id, last_activity_at, goals, lifetime_value,
                                   purchase_count, refund_count, last_purchase_at)
SELECT p.contact_id, p.ws, p.last_at, p.goals, p.ltv, p.purchases, p.refunds, p.last_purchase
  FROM per_contact p
 ORDER BY p.contact_id
ON CONFLICT (contact_id) DO UPDATE
   SET last_activity_at = greatest(a.last_activity_at, EXCLUDED.last_activity_at),
       goals            = a.goals + EXCLUDED.goals,
       lifetime_value   = a.lifetime_value + EXCLUDED.lifetime_value,
       purchase_count   = a.purchase_count + EXCLUDED.purchase_count,
       refund_count     = a.refund_count + EXCLUDED.refund_count,
       last_purchase_at = greatest(a.last_purchase_at, EXCLUDED.last_purchase_at),
       updated_at       = now()
