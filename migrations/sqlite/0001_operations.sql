-- rankd's operational state (SQLite flavour; migrations/postgres/ holds the same schema for
-- PostgreSQL). Times are milliseconds since the Unix epoch; JSON is stored as text.

-- Query texts, by query id: TREC qrels carry only ids, so texts arrive on their own.
CREATE TABLE queries (
    query_id    TEXT PRIMARY KEY,
    text        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

-- One graded judgment per (query, document); a new grade for the same pair replaces the old.
CREATE TABLE judgments (
    query_id    TEXT NOT NULL,
    doc_id      TEXT NOT NULL,
    grade       BIGINT NOT NULL,
    source      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (query_id, doc_id)
);

-- Trained rerankers: the weights stay files, the row points at them.
CREATE TABLE models (
    id                   TEXT PRIMARY KEY,
    file_path            TEXT NOT NULL,
    objective            TEXT NOT NULL,
    model_kind           TEXT NOT NULL,
    feature_set_version  BIGINT NOT NULL,
    metrics              TEXT NOT NULL DEFAULT '{}',
    created_at           BIGINT NOT NULL,
    parent               TEXT REFERENCES models (id),
    status               TEXT NOT NULL CHECK (status IN ('inactive', 'active', 'deleted'))
);

-- Every activation, newest last: the history a rollback walks back through.
CREATE TABLE model_activations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    model_id      TEXT NOT NULL REFERENCES models (id),
    activated_at  BIGINT NOT NULL,
    activated_by  TEXT NOT NULL
);

CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT NOT NULL CHECK (kind IN ('train', 'graph', 'eval')),
    params            TEXT NOT NULL,
    status            TEXT NOT NULL
                      CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    progress          DOUBLE PRECISION NOT NULL DEFAULT 0,
    message           TEXT NOT NULL DEFAULT '',
    cancel_requested  BIGINT NOT NULL DEFAULT 0,
    result            TEXT,
    error             TEXT,
    created_at        BIGINT NOT NULL,
    started_at        BIGINT,
    finished_at       BIGINT
);
CREATE INDEX jobs_by_status ON jobs (status);
-- At most one queued or running job of each kind: two graph computations (or two trainings)
-- at once would only compete for the same cores and the same output.
CREATE UNIQUE INDEX one_active_job_per_kind ON jobs (kind) WHERE status IN ('queued', 'running');

-- Log lines of a job: free text or one JSON object per line (per-epoch training metrics).
CREATE TABLE job_logs (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id  BIGINT NOT NULL REFERENCES jobs (id),
    ts      BIGINT NOT NULL,
    line    TEXT NOT NULL
);
CREATE INDEX job_logs_by_job ON job_logs (job_id, id);

-- Operator-reviewed TrustRank seeds (SPEC §2.5), by document id.
CREATE TABLE trustrank_seeds (
    doc_id    TEXT PRIMARY KEY,
    added_at  BIGINT NOT NULL
);

-- Pairs handed to a labeller (SPEC §5), so two labellers do not judge the same pair at once.
CREATE TABLE label_reservations (
    query_id     TEXT NOT NULL,
    doc_id       TEXT NOT NULL,
    reserved_by  TEXT NOT NULL,
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (query_id, doc_id)
);
