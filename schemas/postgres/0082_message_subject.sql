-- The subject line a message went out with (delivery renders it with
-- Liquid when it hands the message off; stages/delivery finish.sql stores
-- it). The message log and the message lookups show it; NULL until the
-- message is handed off, or when it failed before its subject rendered.
ALTER TABLE transactional_messages ADD COLUMN IF NOT EXISTS subject text;
