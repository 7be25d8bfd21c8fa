-- Goal revenue per day and currency, net of refunds (negative values):
-- $workspace, [$from, $to) as Unix seconds.
SELECT toDate(occurred_at) AS day, currency,
       round(sumIf(value, value > 0), 2) AS gross,
       round(abs(sumIf(value, value < 0)), 2) AS refunds,
       round(sum(value), 2) AS net,
       countIf(value > 0) AS conversions,
       countIf(value < 0) AS refund_count
FROM
(
    SELECT id, occurred_at, currency, value
    FROM events
    WHERE workspace = ? AND occurred_at >= toDateTime(?) AND occurred_at < toDateTime(?)
      AND goal_type != '' AND has_value = 1
    LIMIT 1 BY id
)
GROUP BY day, currency
ORDER BY day, currency
