-- $1 id, $2 name, $3 plan, $4 contact_limit, $5 rate_multiplier
INSERT INTO workspaces (id, name, plan, contact_limit, rate_multiplier)
VALUES ($1, $2, $3, $4, $5)
