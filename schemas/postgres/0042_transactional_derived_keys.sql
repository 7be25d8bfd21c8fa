-- Two unique indexes of transactional_messages are implied by its primary
-- key, and each cost every send an index insert and a uniqueness check
-- (together about 45 µs of a 110 µs row insert, pgbench with 16-row
-- batches), and every non-HOT status change another insert:
--   - (workspace_id, external_id): a message sent with an externalId has the
--     id derived from both (schemas.IDFromKey(workspace, "transactional",
--     externalId)), so the primary key already allows one message per
--     externalId, and lookups by externalId use the derived id;
--   - (rfc_message_id): the Message-ID is <id>@<domain>, so a provider
--     report finds the message by the id part and checks the whole.
DROP INDEX IF EXISTS transactional_messages_external;
DROP INDEX IF EXISTS transactional_messages_rfc;
