-- Unique contacts per event name (events without a contact are counted in
-- events, not in contacts): $workspace, [$from, $to) as Unix seconds.
SELECT event, uniqExactIf(contact_id, contact_id != '') AS contacts, count() AS events
FROM
(
    SELECT id, event, contact_id
    FROM events
    WHERE workspace = ? AND occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?)
    LIMIT 1 BY id
)
GROUP BY event
ORDER BY contacts DESC, event
