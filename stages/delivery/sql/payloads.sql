-- Stored (spilled) payloads of messages $1.
SELECT message_id, payload FROM transactional_payloads WHERE message_id = ANY ($1::text[])
