-- contact_activity is read and written only by contact id (the goals stage,
-- the contacts' delete trigger); its workspace index served no query and
-- cost every recorded event's first goal one more index insert.
DROP INDEX IF EXISTS contact_activity_workspace;
