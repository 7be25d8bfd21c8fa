-- $1 email (normalised) → the login's id and password hash
SELECT id, password_hash FROM logins WHERE email = $1
