-- Set the status of journey $1 to $2 at $3.
UPDATE journeys SET status = $2, updated_at = $3 WHERE id = $1
