-- Records the outcome of each delivery $1's claimed attempt ($2, $3):
-- state $4 ('settled' or 'done') and the attempt rows $5 its Handle
-- returned. A claim taken over since (a later attempt) is left alone.
UPDATE webhook_delivery_claims AS c
SET state = u.s, outputs = u.o
FROM unnest($1::text[], $2::int[], $3::int[], $4::text[], $5::bytea[]) AS u (d, a, t, s, o)
WHERE c.delivery = u.d AND c.attempt = u.a AND c.throttled = u.t
