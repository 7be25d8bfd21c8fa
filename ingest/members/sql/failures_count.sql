-- $1 keys, $2 window cut-off → failures of each key whose window is open
SELECT key, failures FROM login_failures WHERE key = ANY($1) AND window_start > $2
