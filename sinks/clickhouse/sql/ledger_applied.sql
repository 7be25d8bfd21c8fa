SELECT DISTINCT name FROM schema_migrations
