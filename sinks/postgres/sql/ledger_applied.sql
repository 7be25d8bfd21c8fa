SELECT name FROM schema_migrations
