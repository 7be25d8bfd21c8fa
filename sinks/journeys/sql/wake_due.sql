-- Whether scope $1 has a wake-up due by $2: the wake relay's check before
-- it opens a claiming transaction, so an idle round is one indexed probe
-- (journey_wakes_due) instead of BEGIN, a claim and a rollback.
SELECT EXISTS (SELECT 1 FROM journey_wakes WHERE scope = $1 AND due_at <= $2)
