-- The DKIM selector and key of workspace $1's domain $2 (no row: not a
-- domain of the workspace; NULL key: the domain does not sign).
SELECT dkim_selector, dkim_private_key FROM sending_domains WHERE workspace_id = $1 AND domain = $2
