-- Every target one message was published for, with its body and the
-- highest attempt number published (ReplacingMergeTree(attempt) keeps that
-- row at merge time; argMax and max read the same before). Parameters:
-- workspace, message id.
SELECT message_id, target_id, argMax(target_kind, attempt), argMax(url, attempt),
       argMax(event, attempt), min(first_at) AS first, max(attempt),
       argMax(body, attempt)
FROM webhook_messages
WHERE workspace = ? AND message_id = ?
GROUP BY message_id, target_id
ORDER BY target_id
