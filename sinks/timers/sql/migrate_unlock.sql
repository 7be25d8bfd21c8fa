-- Release migrate_lock.sql's lock.
SELECT pg_advisory_unlock(hashtext('sendstream.timers.migrate'))
