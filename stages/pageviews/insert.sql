INSERT INTO page_views (id, workspace, occurred_at, host, path, title, referrer_host, utm_source, utm_medium, utm_campaign, screen_width, user_agent, inserted_at)
