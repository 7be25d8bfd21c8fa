-- Add a sending domain (or keep the existing one and its key); returns the
-- selector and key in effect.
INSERT INTO sending_domains AS d (workspace_id, domain, dkim_selector, dkim_private_key)
VALUES ($1, $2, $3, $4)
ON CONFLICT (workspace_id, domain) DO UPDATE SET domain = d.domain
RETURNING dkim_selector, coalesce(dkim_private_key, '')
