-- The journey and ancestry of execution $1, whose step caused a start (an
-- add_to_list step whose list join starts list_joined journeys).
SELECT journey_id, coalesce(ancestry, '{}') FROM journey_executions WHERE id = $1
