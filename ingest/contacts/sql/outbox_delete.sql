-- Delete the contact_outbox rows $1 whose events were published.
DELETE FROM contact_outbox WHERE id = ANY($1::bigint[])
