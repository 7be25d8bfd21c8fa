-- The status of transactional message $1 (the id a journey step's
-- idempotency key derives), if it exists.
SELECT status FROM transactional_messages WHERE id = $1
