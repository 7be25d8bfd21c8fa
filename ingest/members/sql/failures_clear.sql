-- $1 key: a successful sign-in forgets the account's failures
DELETE FROM login_failures WHERE key = $1
