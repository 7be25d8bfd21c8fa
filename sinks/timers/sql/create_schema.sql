-- The schema of River's tables for a client on an injected clock
-- (Config.Clock); the verb is the quoted schema name (fmt).
CREATE SCHEMA IF NOT EXISTS %s
