-- Events per day per name: $workspace, [$from, $to) as Unix seconds.
SELECT toDate(occurred_at) AS day, event, count() AS events
FROM
(
    SELECT id, event, occurred_at
    FROM events
    WHERE workspace = ? AND occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?)
    LIMIT 1 BY id
)
GROUP BY day, event
ORDER BY day, event
