-- Active learning (SPEC §5), SQLite flavour (migrations/postgres/ holds the same file):
-- batches of (query, document) pairs chosen for labelling, and the reservations that keep a
-- pair out of later batches until it is judged or its reservation expires. 0001 declared
-- `label_reservations` without a batch; no release ever wrote to it, so it is replaced
-- rather than altered.

-- One row per batch: who asked, with which parameters, how large the pool was (the audit
-- trail seed note 002 §6.4 asks for, so a selection can be replayed).
CREATE TABLE label_batches (
    batch_id    TEXT PRIMARY KEY,
    assessor    TEXT NOT NULL,
    params      TEXT NOT NULL,
    model       TEXT,
    pool_size   BIGINT NOT NULL,
    items       BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);

DROP TABLE label_reservations;

-- A pair handed to an assessor; deleted when a judgment of the pair is stored or the batch is
-- released, ignored (and cleaned up by the next batch) once `expires_at` has passed.
CREATE TABLE label_reservations (
    query_id     TEXT NOT NULL,
    doc_id       TEXT NOT NULL,
    batch_id     TEXT NOT NULL REFERENCES label_batches (batch_id),
    position     BIGINT NOT NULL,
    reserved_by  TEXT NOT NULL,
    reserved_at  BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (query_id, doc_id)
);
CREATE INDEX label_reservations_by_batch ON label_reservations (batch_id);
