-- The cluster metastore (issue 13, docs/design/scale-out.md §9), PostgreSQL flavour
-- (migrations/sqlite/ holds the same file): which collections exist and how they are split,
-- which nodes registered, which node holds which shard, and the generations published per
-- shard with the current one. Gossip (chitchat) says who is alive; these tables say what is
-- true. The tables carry a `cluster_` prefix and live in the ops database's migration set, so
-- one `sqlx::migrate!` directory per backend stays the whole schema (two migration sets in one
-- database would share sqlx's `_sqlx_migrations` table and refuse each other's versions).

-- A collection split over shards by `hash_scheme` (`crate::cluster::routing::HASH_SCHEME`).
CREATE TABLE cluster_collections (
    name         TEXT PRIMARY KEY,
    shards       BIGINT NOT NULL CHECK (shards > 0),
    hash_scheme  TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);

-- One row per shard; `current_generation` is NULL until the first publish and moves only by
-- compare-and-set (`crate::cluster::metastore::Metastore::publish_generation`).
CREATE TABLE cluster_shards (
    collection          TEXT NOT NULL REFERENCES cluster_collections (name),
    shard               BIGINT NOT NULL CHECK (shard >= 0),
    current_generation  BIGINT,
    PRIMARY KEY (collection, shard)
);

-- Nodes as they last registered (liveness is gossip's, not this table's).
CREATE TABLE cluster_nodes (
    node_id        TEXT PRIMARY KEY,
    role           TEXT NOT NULL CHECK (role IN ('leaf', 'root')),
    api_url        TEXT NOT NULL,
    gossip_addr    TEXT NOT NULL,
    registered_at  BIGINT NOT NULL
);

-- Which node holds (or is to hold) which shard.
CREATE TABLE cluster_replicas (
    collection  TEXT NOT NULL,
    shard       BIGINT NOT NULL,
    node_id     TEXT NOT NULL REFERENCES cluster_nodes (node_id),
    state       TEXT NOT NULL CHECK (state IN ('assigned', 'fetching', 'serving', 'draining')),
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (collection, shard, node_id),
    FOREIGN KEY (collection, shard) REFERENCES cluster_shards (collection, shard)
);

-- Every published generation of a shard, with the object-storage key of its manifest.
CREATE TABLE cluster_generations (
    collection    TEXT NOT NULL,
    shard         BIGINT NOT NULL,
    generation    BIGINT NOT NULL CHECK (generation > 0),
    manifest_key  TEXT NOT NULL,
    published_at  BIGINT NOT NULL,
    PRIMARY KEY (collection, shard, generation),
    FOREIGN KEY (collection, shard) REFERENCES cluster_shards (collection, shard)
);
