INSERT INTO schema_migrations (name, applied_at)
