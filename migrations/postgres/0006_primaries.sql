-- Shard primaries chosen through the metastore (src/cluster/election.rs): at most one lease
-- per shard of a collection, held by the node that renews it before `expires_at` (ms since
-- the epoch); a node takes it over only once it has expired.
CREATE TABLE cluster_primaries (
    collection  TEXT NOT NULL,
    shard       BIGINT NOT NULL,
    node_id     TEXT NOT NULL,
    api_url     TEXT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (collection, shard)
);
