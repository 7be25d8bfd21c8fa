-- Serialize the creation and migration of River's tables between
-- processes (the journey engine's timers and the trigger endpoint's
-- Inserter start at once on a fresh schema; rivermigrate takes no lock):
-- a session advisory lock, held until migrate_unlock.sql.
SELECT pg_advisory_lock(hashtext('sendstream.timers.migrate'))
