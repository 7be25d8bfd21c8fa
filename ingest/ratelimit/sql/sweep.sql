-- Drop windows that ended before minute $1.
DELETE FROM rate_windows WHERE window_min < $1
