-- page_views: anonymous page views sent by track.js, written in batches by
-- the pageviews stage from the sendstream.pageviews.v1 topic. No visitor id
-- or IP is stored. Same exactly-once rule as events: ReplacingMergeTree on
-- the beacon's id, and readers use LIMIT 1 BY id. Runs on 18.16.
CREATE TABLE IF NOT EXISTS page_views
(
    id            String,
    workspace     String,
    occurred_at   DateTime,
    host          String,
    path          String,
    title         String,
    referrer_host String,
    utm_source    String,
    utm_medium    String,
    utm_campaign  String,
    screen_width  UInt16,
    user_agent    String,
    inserted_at   DateTime
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(occurred_at)
ORDER BY (workspace, occurred_at, id);
