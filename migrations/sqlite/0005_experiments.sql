-- Interleaving experiments (src/interleave/), SQLite flavour
-- (migrations/postgres/ holds the same file but for the identity column).

-- One row per experiment: the candidate reranker compared with the active one by team-draft
-- interleaving on `share` of the searches. `status` is running, stopped or promoted; at most
-- one is running (the server checks it in the transaction that inserts). `active` is the
-- model that was active when the experiment started; `note` what ended it.
CREATE TABLE experiments (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    candidate       TEXT NOT NULL,
    active          TEXT,
    share           DOUBLE PRECISION NOT NULL,
    min_impressions BIGINT NOT NULL,
    alpha           DOUBLE PRECISION NOT NULL,
    promote_on_win  BIGINT NOT NULL,
    status          TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    stopped_at      BIGINT,
    note            TEXT
);

-- An interleaved impression names its experiment; its `shown` entries carry each
-- document's `team` ("A": the active ranking, "B": the candidate).
ALTER TABLE search_impressions ADD COLUMN experiment_id BIGINT;
CREATE INDEX search_impressions_by_experiment ON search_impressions (experiment_id);
