INSERT INTO schema_migrations (name, applied_at) VALUES ($1, now())
ON CONFLICT (name) DO NOTHING
