-- $1 workspace, $2 member. Cascades (migrations 0070, 0080, 0081): the
-- member's sessions, OAuth codes and OAuth connections with their tokens go
-- too; each deleted connection announces itself on the sendstream_auth
-- channel (trigger of 0081), so every process's credential cache drops its
-- tokens when this commits. Apps the member created keep working with no
-- creator (created_by SET NULL).
DELETE FROM members WHERE workspace_id = $1 AND id = $2
