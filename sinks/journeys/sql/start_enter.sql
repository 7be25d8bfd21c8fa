-- The re-entry guard of journey $1 and contact $2 under reentry $3 at $4:
-- the first entry inserts the row; later ones update it only when the
-- setting allows (always; once_at_a_time with nothing running), else no
-- row is returned and the start is refused. The conflict's row lock makes
-- racing starts for one contact wait and then see the winner's row.
INSERT INTO journey_entries AS e (journey_id, contact_id, entries, running, first_entered_at, last_entered_at)
VALUES ($1, $2, 1, 1, $4, $4)
ON CONFLICT (journey_id, contact_id) DO UPDATE
   SET entries = e.entries + 1, running = e.running + 1, last_entered_at = EXCLUDED.last_entered_at
 WHERE $3::text = 'always' OR ($3::text = 'once_at_a_time' AND e.running = 0)
RETURNING entries
