-- Create list $1 in workspace $2 with name $3 and double opt-in $4.
INSERT INTO lists (id, workspace_id, name, double_opt_in) VALUES ($1, $2, $3, $4)
RETURNING created_at
