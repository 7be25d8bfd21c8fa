-- Keep the counters of 0010/0011 exact whoever changes a contact's status or
-- deletes a contact (bounce handling, erasure, ...). Inserts are counted by
-- ingest/contacts itself, which must be the only code creating contacts.

CREATE OR REPLACE FUNCTION contacts_status_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE contact_buckets SET n = n - 1
     WHERE workspace_id = OLD.workspace_id AND status = OLD.status AND bucket = OLD.seq >> 10;
    INSERT INTO contact_buckets AS b (workspace_id, status, bucket, n)
    VALUES (NEW.workspace_id, NEW.status, NEW.seq >> 10, 1)
    ON CONFLICT (workspace_id, status, bucket) DO UPDATE SET n = b.n + 1;

    UPDATE list_buckets lb SET n = lb.n - 1
      FROM memberships m
     WHERE m.contact_id = OLD.id AND lb.list_id = m.list_id
       AND lb.status = OLD.status AND lb.bucket = OLD.seq >> 10;
    INSERT INTO list_buckets AS lb (list_id, status, bucket, n)
    SELECT m.list_id, NEW.status, NEW.seq >> 10, 1 FROM memberships m WHERE m.contact_id = NEW.id
    ON CONFLICT (list_id, status, bucket) DO UPDATE SET n = lb.n + 1;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER contacts_status_moved
    AFTER UPDATE OF status ON contacts
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION contacts_status_moved();

-- BEFORE, so the memberships (deleted by the cascade) are still there.
CREATE OR REPLACE FUNCTION contacts_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE contact_buckets SET n = n - 1
     WHERE workspace_id = OLD.workspace_id AND status = OLD.status AND bucket = OLD.seq >> 10;
    UPDATE contact_stats SET total = total - 1 WHERE workspace_id = OLD.workspace_id;
    UPDATE lists l SET contact_count = l.contact_count - 1
      FROM memberships m WHERE m.contact_id = OLD.id AND l.id = m.list_id;
    UPDATE list_buckets lb SET n = lb.n - 1
      FROM memberships m
     WHERE m.contact_id = OLD.id AND lb.list_id = m.list_id
       AND lb.status = OLD.status AND lb.bucket = OLD.seq >> 10;
    RETURN OLD;
END
$$;

CREATE OR REPLACE TRIGGER contacts_deleted
    BEFORE DELETE ON contacts
    FOR EACH ROW EXECUTE FUNCTION contacts_deleted();
