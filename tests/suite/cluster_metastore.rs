//! The cluster metastore (`rankd::cluster::metastore`) against a real database: PostgreSQL
//! when `RANKD_TEST_DATABASE_URL` names a server (`.ci/run` starts one; the tests fail, not
//! skip, when it is set and unreachable), else SQLite, as the ops suites do.
//!
//! Registration and the map read back; the publish compare-and-set raced by concurrent
//! publishers (exactly one wins each race); the database becoming unreachable mid-run (the
//! last map keeps serving, the error says what failed) and back; a start without the database
//! from the cache file, and a clear error without one.

use std::sync::Arc;
use std::time::Duration;

use crate::util::*;
use rankd::cluster::metastore::*;

const TIMEOUT: Duration = Duration::from_secs(5);
/// For the unreachable database: sqlx retries a refused connection until its timeout.
const SHORT: Duration = Duration::from_millis(500);

/// Runs `statement` on its own connection to `url` (inside the test's runtime); the first
/// column of its rows as integers.
async fn exec(url: &str, statement: &str) -> Vec<i64> {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::AnyConnection::connect(url).await.unwrap();
    sqlx::query(statement)
        .fetch_all(&mut conn)
        .await
        .unwrap()
        .iter()
        .map(|r| r.try_get::<i64, _>(0).unwrap_or(0))
        .collect()
}

/// The tests reading the process's metastore gauge run one at a time.
static GAUGE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn leaf(id: &str, port: u16) -> NodeRecord {
    NodeRecord {
        node_id: id.into(),
        role: "leaf".into(),
        api_url: format!("http://127.0.0.1:{port}"),
        gossip_addr: format!("127.0.0.1:{}", port + 1000),
        registered_at: 1,
    }
}

/// A metastore with collection `c` of 3 shards and two leaves holding shard 1.
async fn populated(url: &str) -> Metastore {
    let store = Metastore::connect(url, TIMEOUT).await.unwrap();
    store.create_collection("c", 3).await.unwrap();
    // Recording it again is a no-op; another shard count is refused.
    store.create_collection("c", 3).await.unwrap();
    let err = store.create_collection("c", 4).await.unwrap_err();
    assert!(
        err.to_string().contains("already exists with 3 shards"),
        "{err}"
    );
    store.register_node(&leaf("a", 8101)).await.unwrap();
    store.register_node(&leaf("b", 8102)).await.unwrap();
    store
        .upsert_replicas(
            "c",
            &[
                (1, "a", ReplicaState::Serving),
                (1, "b", ReplicaState::Fetching),
            ],
        )
        .await
        .unwrap();
    store
        .upsert_replicas("c", &[(1, "b", ReplicaState::Serving)])
        .await
        .unwrap();
    store
}

#[test]
fn registration_publish_and_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let url = fresh_database(dir.path());
    runtime().block_on(async {
        let store = populated(&url).await;
        // A replica of an unknown node or shard is refused by the schema.
        let err = store
            .upsert_replicas("c", &[(7, "a", ReplicaState::Serving)])
            .await
            .unwrap_err();
        assert!(format!("{err:#}").contains("shard 7"), "{err:#}");
        assert_eq!(
            store
                .publish_generation("c", 1, None, 1, "c/1/0001.json")
                .await
                .unwrap(),
            Publish::Won
        );
        assert_eq!(
            store
                .publish_generation("c", 1, Some(1), 2, "c/1/0002.json")
                .await
                .unwrap(),
            Publish::Won
        );
        // A publisher that saw generation 1 lost to the one that published 2.
        assert_eq!(
            store
                .publish_generation("c", 1, Some(1), 3, "c/1/0003.json")
                .await
                .unwrap(),
            Publish::Lost { current: Some(2) }
        );
        let err = store
            .publish_generation("c", 9, None, 1, "x")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no shard 9"), "{err}");

        let map = store.read_map().await.unwrap();
        let c = map.collection("c").unwrap();
        assert_eq!(c.hash_scheme, rankd::cluster::routing::HASH_SCHEME);
        assert_eq!(c.shards.len(), 3);
        assert_eq!(c.shards[1].current_generation, Some(2));
        assert_eq!(c.shards[1].manifest_key.as_deref(), Some("c/1/0002.json"));
        assert_eq!(c.shards[0].current_generation, None);
        assert_eq!(
            c.shards[1].replicas,
            vec![
                ReplicaRecord {
                    node_id: "a".into(),
                    state: ReplicaState::Serving
                },
                ReplicaRecord {
                    node_id: "b".into(),
                    state: ReplicaState::Serving
                }
            ]
        );
        assert_eq!(
            map.replica_urls("c", 1),
            ["http://127.0.0.1:8101", "http://127.0.0.1:8102"]
        );
        // A node registering again replaces its addresses.
        store.register_node(&leaf("a", 9101)).await.unwrap();
        let map = store.read_map().await.unwrap();
        assert_eq!(map.nodes[0].api_url, "http://127.0.0.1:9101");
    });
}

/// Two publishers start from the same generation at once, twenty times over: exactly one
/// wins each race, the loser learns the winner's generation, and only the winner's generation
/// is recorded.
#[test]
fn concurrent_publishers_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let url = fresh_database(dir.path());
    runtime().block_on(async {
        let store = populated(&url).await;
        // A second connection pool, as a second publisher process would have.
        let other = Metastore::connect(&url, TIMEOUT).await.unwrap();
        let mut current: Option<u64> = None;
        for round in 0..20u64 {
            let base = current.unwrap_or(0);
            let (g1, g2) = (base + 1, base + 2);
            let (a, b) = tokio::join!(
                store.publish_generation("c", 2, current, g1, "one"),
                other.publish_generation("c", 2, current, g2, "two"),
            );
            let (a, b) = (a.unwrap(), b.unwrap());
            let winner = match (a, b) {
                (Publish::Won, Publish::Lost { current: Some(g) }) if g == g1 => g1,
                (Publish::Lost { current: Some(g) }, Publish::Won) if g == g2 => g2,
                other => panic!("round {round}: {other:?}"),
            };
            current = Some(winner);
        }
        let map = store.read_map().await.unwrap();
        assert_eq!(
            map.collection("c").unwrap().shards[2].current_generation,
            current
        );
        let recorded = exec(
            &url,
            "SELECT CAST(COUNT(*) AS BIGINT) FROM cluster_generations WHERE shard = 2",
        )
        .await;
        assert_eq!(recorded, [20], "one generation recorded per race");
    });
}

/// The database goes away while a node runs: refreshes fail with an error naming what
/// failed, the map in force stays the last one read, and the next refresh after the database
/// returns replaces it. On PostgreSQL the test's database refuses connections and its
/// sessions are terminated (the server of the other tests keeps running); on SQLite, the
/// tables vanish.
#[test]
fn the_last_map_serves_while_the_database_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let url = fresh_database(dir.path());
    let cache = MapCache::in_data_dir(&dir.path().join("node"));
    let postgres = url.starts_with("postgres");
    let _gauge = GAUGE.lock().unwrap_or_else(|p| p.into_inner());
    runtime().block_on(async {
        let store = populated(&url).await;
        let (live, source) = LiveMap::open(&url, cache.clone(), TIMEOUT).await.unwrap();
        assert_eq!(source, MapSource::Metastore);
        let before = live.get();
        assert_eq!(before.replica_urls("c", 1).len(), 2);
        assert_eq!(cache.load().unwrap().as_ref(), Some(&*before));

        let database = url::Url::parse(&url)
            .unwrap()
            .path()
            .trim_start_matches('/')
            .to_string();
        let admin = std::env::var("RANKD_TEST_DATABASE_URL").unwrap_or_default();
        if postgres {
            exec(
                &admin,
                &format!("ALTER DATABASE {database} ALLOW_CONNECTIONS false"),
            )
            .await;
            exec(
                &admin,
                &format!(
                    "SELECT CAST(COUNT(pg_terminate_backend(pid)) AS BIGINT) FROM \
                     pg_stat_activity WHERE datname = '{database}'"
                ),
            )
            .await;
        } else {
            exec(
                &url,
                "ALTER TABLE cluster_replicas RENAME TO cluster_replicas_away",
            )
            .await;
        }
        let err = live.refresh().await.unwrap_err();
        let message = format!("{err:#}");
        println!("refresh with the database down: {message}");
        if postgres {
            assert!(
                message.contains("cluster map") || message.contains("metastore"),
                "{message}"
            );
        } else {
            assert!(message.contains("cannot read the cluster map"), "{message}");
        }
        assert_eq!(live.get(), before, "the last map stays in force");
        let metrics = rankd::metrics::render();
        assert!(metrics.contains("rankd_metastore_up 0"), "{metrics}");
        assert!(!metrics.contains("rankd_metastore_errors_total{operation=\"read_map\"} 0"));

        // Back: the next refresh reads the database again.
        if postgres {
            exec(
                &admin,
                &format!("ALTER DATABASE {database} ALLOW_CONNECTIONS true"),
            )
            .await;
        } else {
            exec(
                &url,
                "ALTER TABLE cluster_replicas_away RENAME TO cluster_replicas",
            )
            .await;
        }
        let mut back = Err(anyhow::anyhow!("not tried"));
        for _ in 0..20 {
            back = store.register_node(&leaf("c", 8103)).await;
            if back.is_ok() {
                back = live.refresh().await;
            }
            if back.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        back.unwrap();
        assert_eq!(live.get().nodes.len(), 3);
        assert!(rankd::metrics::render().contains("rankd_metastore_up 1"));
    });
}

/// A start without the database: from the cache file, with the error kept for the warning;
/// without a cache file, an error that names both.
#[test]
fn a_start_without_the_database_uses_the_cache_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let url = fresh_database(dir.path());
    let cache = MapCache::in_data_dir(&dir.path().join("node"));
    let unreachable = "postgres://rankd:secret@127.0.0.1:1/rankd";
    let _gauge = GAUGE.lock().unwrap_or_else(|p| p.into_inner());
    runtime().block_on(async {
        let err = LiveMap::open(unreachable, cache.clone(), SHORT)
            .await
            .err()
            .unwrap();
        let message = format!("{err:#}");
        assert!(
            message.contains("the metastore is unreachable and there is no last known map")
                && message.contains("last_map.json does not exist")
                && message.contains("127.0.0.1:1")
                && !message.contains("secret"),
            "{message}"
        );
        populated(&url).await;
        let (first, _) = LiveMap::open(&url, cache.clone(), TIMEOUT).await.unwrap();
        let (live, source) = LiveMap::open(unreachable, cache.clone(), SHORT)
            .await
            .unwrap();
        let MapSource::Cache { error } = source else {
            panic!("{source:?}")
        };
        assert!(error.contains("cannot connect to the metastore"), "{error}");
        assert_eq!(live.get(), first.get());
        let live = Arc::clone(&live);
        assert!(live.refresh().await.is_err());
        assert_eq!(live.get(), first.get());
    });
}

/// Leaves starting together all create their collection: every creation succeeds (none fails
/// on the primary key the other inserted first), the shards are created once, and a
/// different shard count is still refused.
#[test]
fn concurrent_creations_of_a_collection_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let url = fresh_database(dir.path());
    runtime().block_on(async {
        for round in 0..10 {
            let name = format!("together-{round}");
            let mut stores = Vec::new();
            for _ in 0..4 {
                stores.push(Metastore::connect(&url, TIMEOUT).await.unwrap());
            }
            let results = futures_util::future::join_all(
                stores.iter().map(|s| s.create_collection(&name, 3)),
            )
            .await;
            for r in &results {
                assert!(r.is_ok(), "round {round}: {r:?}");
            }
            let map = stores[0].read_map().await.unwrap();
            assert_eq!(map.collection(&name).unwrap().shards.len(), 3);
            let refused = stores[0].create_collection(&name, 4).await.unwrap_err();
            assert!(format!("{refused:#}").contains("already exists with 3 shards"));
        }
    });
}

/// The primary lease (`Metastore::lease_primary`, `crate::cluster::election`): of two nodes
/// asking at once exactly one holds it; the holder renews it, the other cannot take it until
/// it expires, then can; a released lease is free at once.
#[test]
fn one_node_holds_a_shards_primary_lease_until_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let url = fresh_database(dir.path());
    runtime().block_on(async {
        let a = Metastore::connect(&url, TIMEOUT).await.unwrap();
        let b = Metastore::connect(&url, TIMEOUT).await.unwrap();
        // Long enough that two calls in a row fall within it on a loaded machine.
        let ttl = Duration::from_secs(2);
        for round in 0..10u32 {
            let (x, y) = tokio::join!(
                a.lease_primary("c", round, "a", "http://a", ttl),
                b.lease_primary("c", round, "b", "http://b", ttl),
            );
            let (x, y) = (x.unwrap(), y.unwrap());
            assert!(x != y, "round {round}: a {x}, b {y}");
        }
        assert!(a
            .lease_primary("c", 99, "a", "http://a", ttl)
            .await
            .unwrap());
        assert!(
            a.lease_primary("c", 99, "a", "http://a", ttl)
                .await
                .unwrap(),
            "renewed"
        );
        assert!(!b
            .lease_primary("c", 99, "b", "http://b", ttl)
            .await
            .unwrap());
        tokio::time::sleep(ttl + Duration::from_millis(50)).await;
        assert!(
            b.lease_primary("c", 99, "b", "http://b", ttl)
                .await
                .unwrap(),
            "expired"
        );
        assert!(!a
            .lease_primary("c", 99, "a", "http://a", ttl)
            .await
            .unwrap());
        b.release_primary("c", 99, "b").await.unwrap();
        assert!(
            a.lease_primary("c", 99, "a", "http://a", ttl)
                .await
                .unwrap(),
            "released"
        );
    });
}
