-- Phase (b) of the journeys benchmark: each waiting execution's due time
-- and its contact's email, read while every one still waits.
SELECT e.id, c.email, e.next_wake_at
FROM journey_executions e
JOIN contacts c ON c.id = e.contact_id
WHERE e.journey_id = $1 AND e.next_wake_at IS NOT NULL
