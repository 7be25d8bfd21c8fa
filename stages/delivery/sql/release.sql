-- Give up claims of token $1 on messages $2 that were not handed off (the
-- provider was unavailable): they stay queued and are tried again. The
-- status test takes no index, as in claim_queued.sql.
UPDATE transactional_messages SET claim_token = NULL, claimed_at = NULL
 WHERE id = ANY ($2::text[]) AND claim_token = $1 AND (status = 'queued') IS TRUE
