-- Foreign keys off the hot insert paths. A foreign key checks every
-- inserted row with SELECT ... FOR KEY SHARE on the parent: one workspace
-- row share-locked by every concurrent contact upsert and send (a MultiXact
-- per lock) and one contact row locked, and so written, per recorded event.
-- That was ~20% of an upsert statement (pgbench, 16-row batches). The rows
-- these keys guarded are only ever inserted by ingest/ and stages/ with a
-- parent they just read (the caller's authenticated workspace, the contact
-- an event matched, the message of the same statement), so the keys go and
-- the one thing they still did, cascading deletes, moves to triggers that
-- delete the children in one statement per parent statement.
ALTER TABLE contacts DROP CONSTRAINT IF EXISTS contacts_workspace_id_fkey;
ALTER TABLE transactional_messages DROP CONSTRAINT IF EXISTS transactional_messages_workspace_id_fkey;
ALTER TABLE transactional_payloads DROP CONSTRAINT IF EXISTS transactional_payloads_message_id_fkey;
ALTER TABLE contact_activity DROP CONSTRAINT IF EXISTS contact_activity_contact_id_fkey;

-- A deleted workspace takes its contacts and messages with it (the other
-- workspace tables keep their ON DELETE CASCADE keys), and the counter rows
-- the contacts' delete trigger just bumped.
CREATE OR REPLACE FUNCTION workspaces_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM contacts WHERE workspace_id = OLD.id;
    DELETE FROM contact_buckets WHERE workspace_id = OLD.id;
    DELETE FROM transactional_messages WHERE workspace_id = OLD.id;
    RETURN OLD;
END
$$;
CREATE OR REPLACE TRIGGER workspaces_deleted
    BEFORE DELETE ON workspaces
    FOR EACH ROW EXECUTE FUNCTION workspaces_deleted();

-- A deleted contact takes its activity with it, a deleted message its
-- stored payload: delete_children(child table, its parent-id column)
-- deletes the children of a statement's deleted rows in one statement.
CREATE OR REPLACE FUNCTION delete_children() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DELETE FROM %I c USING old_rows o WHERE c.%I = o.id', TG_ARGV[0], TG_ARGV[1]);
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER contacts_cascade
    AFTER DELETE ON contacts REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION delete_children('contact_activity', 'contact_id');
CREATE OR REPLACE TRIGGER transactional_messages_deleted
    AFTER DELETE ON transactional_messages REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION delete_children('transactional_payloads', 'message_id');
