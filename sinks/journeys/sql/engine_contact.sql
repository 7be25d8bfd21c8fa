-- What branch conditions read of contact $1: its fields, custom fields and
-- goal totals (contact_activity, written by the goals stage).
SELECT c.email, coalesce(c.first_name, ''), coalesce(c.country, ''), coalesce(c.language, ''), c.status,
       coalesce(c.source, ''), c.custom_fields,
       coalesce(a.lifetime_value, 0)::float8, coalesce(a.purchase_count, 0), a.last_purchase_at
  FROM contacts c LEFT JOIN contact_activity a ON a.contact_id = c.id
 WHERE c.id = $1
