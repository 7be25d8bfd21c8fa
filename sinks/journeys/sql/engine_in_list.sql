-- Whether contact $1 has an ACTIVE membership of list $2.
SELECT EXISTS (SELECT 1 FROM memberships WHERE contact_id = $1 AND list_id = $2 AND status = 'ACTIVE')
