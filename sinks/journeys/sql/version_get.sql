-- The definition of version $2 of journey $1.
SELECT definition FROM journey_versions WHERE journey_id = $1 AND version = $2
