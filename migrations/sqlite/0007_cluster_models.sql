-- A cluster collection's rerankers (src/cluster/models.rs), read by every root of the
-- collection: the node registry's columns (0001's `models`) per collection, with the model
-- file itself in `body`, since no root's disk is another's.
CREATE TABLE cluster_models (
    collection           TEXT NOT NULL,
    id                   TEXT NOT NULL,
    file_path            TEXT NOT NULL,
    objective            TEXT NOT NULL,
    model_kind           TEXT NOT NULL,
    feature_set_version  BIGINT NOT NULL,
    metrics              TEXT NOT NULL DEFAULT '{}',
    created_at           BIGINT NOT NULL,
    parent               TEXT,
    status               TEXT NOT NULL CHECK (status IN ('inactive', 'active', 'deleted')),
    body                 BLOB NOT NULL,
    PRIMARY KEY (collection, id)
);
-- At most one active model per collection: two roots activating at once cannot both win.
CREATE UNIQUE INDEX one_active_cluster_model ON cluster_models (collection) WHERE status = 'active';

-- Every activation in a collection, newest last: the history a rollback walks back through.
CREATE TABLE cluster_model_activations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    collection    TEXT NOT NULL,
    model_id      TEXT NOT NULL,
    activated_at  BIGINT NOT NULL,
    activated_by  TEXT NOT NULL
);
