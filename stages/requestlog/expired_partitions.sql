-- Active daily partitions of request_log whose day is older than the
-- retention (the bound parameter, in days), by the server's clock and time
-- zone, the same ones toYYYYMMDD(at) used when the rows were written.
SELECT DISTINCT partition_id
FROM system.parts
WHERE database = currentDatabase()
  AND table = 'request_log'
  AND active
  AND partition_id < toString(toYYYYMMDD(subtractDays(now(), ?)))
ORDER BY partition_id
