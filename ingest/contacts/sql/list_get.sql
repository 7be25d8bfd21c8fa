-- List $1: its workspace, name and double opt-in setting.
SELECT workspace_id, name, double_opt_in FROM lists WHERE id = $1
