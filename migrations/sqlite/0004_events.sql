-- Impressions and user events (src/events/), SQLite flavour
-- (migrations/postgres/ holds the same file but for the identity column).

-- One row per answered search: what was shown, in order, to whom. `shown` is a JSON array of
-- {"object_id", "position"} (position: the 1-based rank in the whole result list).
-- `best_click` is the smallest position clicked so far (NULL: abandoned so far), kept so that
-- CTR@k and abandonment count each impression once.
CREATE TABLE search_impressions (
    query_id    TEXT PRIMARY KEY,
    created_at  BIGINT NOT NULL,
    query       TEXT NOT NULL,
    model       TEXT NOT NULL,
    reranker    TEXT,
    client_id   TEXT,
    page_offset BIGINT NOT NULL,
    page_size   BIGINT NOT NULL,
    shown       TEXT NOT NULL,
    best_click  BIGINT
);
CREATE INDEX search_impressions_by_time ON search_impressions (created_at);

-- One row per accepted event (OpenSearch UBI's fields, flattened: see docs/GUIDE.md).
-- `event_time` is the client's timestamp, `received_at` the server's; retention uses the latter.
CREATE TABLE search_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    query_id    TEXT NOT NULL,
    action_name TEXT NOT NULL,
    object_id   TEXT,
    position    BIGINT,
    event_time  BIGINT NOT NULL,
    received_at BIGINT NOT NULL,
    dwell_ms    BIGINT,
    client_id   TEXT,
    attributes  TEXT
);
CREATE INDEX search_events_by_query ON search_events (query_id);
CREATE INDEX search_events_by_time ON search_events (received_at);
