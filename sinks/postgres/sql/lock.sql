-- Session-level advisory lock serialising migrations across processes.
SELECT pg_advisory_lock($1)
