-- Store a new message (status queued). With an externalId the partial unique
-- index makes exactly one of concurrent sends insert; the others get no row
-- and read the winner with existing.sql. A spilled payload ($13, else NULL)
-- is stored with it.
WITH ins AS (
    INSERT INTO transactional_messages
           (id, workspace_id, external_id, request_hash, to_email, contact_id, rfc_message_id,
            policy_id, template_id, warnings, provider)
    VALUES ($1, $2, nullif($3, ''), $4, $5, nullif($6, ''), $7, $8, nullif($9, ''), $10, $11)
    ON CONFLICT DO NOTHING
    RETURNING id, created_at
),
pay AS (
    INSERT INTO transactional_payloads (message_id, payload)
    SELECT i.id, $12 FROM ins i WHERE $12::bytea IS NOT NULL
)
SELECT id, created_at FROM ins
