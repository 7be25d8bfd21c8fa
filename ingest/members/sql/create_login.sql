-- $1 id, $2 email (normalised), $3 password_hash; nothing when the email
-- already has a login
INSERT INTO logins (id, email, password_hash) VALUES ($1, $2, $3)
ON CONFLICT (email) DO NOTHING
