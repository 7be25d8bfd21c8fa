-- $1 token_hash → the session, its member and the member's workspace
SELECT s.id, s.last_seen_at, s.expires_at, s.revoked_at IS NOT NULL,
       m.id, m.role, m.permissions, l.email,
       w.id, w.name, w.plan, w.contact_limit, w.suspended
  FROM sessions s
  JOIN members m ON m.id = s.member_id
  JOIN logins l ON l.id = s.login_id
  JOIN workspaces w ON w.id = m.workspace_id
 WHERE s.token_hash = $1
