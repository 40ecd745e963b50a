//! Who is in the cluster and alive: a thin layer over [`chitchat`], Quickwit's gossip
//! (`docs/design/scale-out.md` §8).
//!
//! Every `rankd serve` of a cluster runs one chitchat instance on UDP. It publishes a few
//! key-values about itself ([`NodeKeys`]: role, HTTP address, the shard and generation it
//! serves, readiness), and chitchat spreads them (Scuttlebutt anti-entropy) and decides who is
//! alive with its phi-accrual failure detector (Hayashibara et al. 2004). rankd writes no
//! protocol, heartbeat or failure detector of its own: it only reads chitchat's live set.
//!
//! From the live set, [`ClusterView`] is what a root needs: for each shard of a collection,
//! the live, ready leaves' base URLs, in rendezvous order ([`super::placement`]). It is
//! rebuilt on every change chitchat reports (a node joining, dying, or changing a key; not on
//! heartbeats) and published through a `tokio::sync::watch` channel.
//!
//! Gossip carries liveness; the metastore ([`super::metastore`]) carries truth (which
//! collections and generations exist). A failure detector is slow by design (about a second
//! here, measured in the tests), so a root still fails over within a search on its own
//! (`super::root`): the view only says whom to try.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chitchat::transport::UdpTransport;
use chitchat::{spawn_chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, NodeState};
use tokio::sync::watch;

use super::placement;

/// The keys a node gossips (Quickwit's members publish the same kind: address, services,
/// readiness).
pub mod keys {
    pub const ROLE: &str = "rankd.role";
    /// The node's HTTP base URL (`http://host:port`).
    pub const API_URL: &str = "rankd.api_url";
    pub const COLLECTION: &str = "rankd.collection";
    /// A leaf's shard number.
    pub const SHARD: &str = "rankd.shard";
    /// How many shards the leaf's collection has (so a root without a metastore knows).
    pub const SHARDS: &str = "rankd.shards";
    /// The index generation the leaf serves (absent: the one on its disk, unnumbered).
    pub const GENERATION: &str = "rankd.generation";
    /// `1` when the node answers requests (its `/readyz` would say 200).
    pub const READY: &str = "rankd.ready";
}

/// What one node says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeKeys {
    /// `leaf` or `root`.
    pub role: String,
    pub api_url: String,
    pub collection: String,
    pub shard: Option<u32>,
    pub shards: Option<u32>,
    pub generation: Option<u64>,
    pub ready: bool,
}

impl NodeKeys {
    fn key_values(&self) -> Vec<(String, String)> {
        let mut kv = vec![
            (keys::ROLE.to_string(), self.role.clone()),
            (keys::API_URL.to_string(), self.api_url.clone()),
            (keys::COLLECTION.to_string(), self.collection.clone()),
            (
                keys::READY.to_string(),
                if self.ready { "1" } else { "0" }.to_string(),
            ),
        ];
        let optional = [
            (keys::SHARD, self.shard.map(u64::from)),
            (keys::SHARDS, self.shards.map(u64::from)),
            (keys::GENERATION, self.generation),
        ];
        for (k, v) in optional {
            if let Some(v) = v {
                kv.push((k.to_string(), v.to_string()));
            }
        }
        kv
    }

    /// What the node says about itself that its tag covers (`super::gossip_auth`): role,
    /// URL, collection, shard and shard count; not readiness or generation, which change.
    fn claims(&self) -> Vec<String> {
        let number = |n: Option<u32>| n.map(|n| n.to_string()).unwrap_or_default();
        vec![
            self.role.clone(),
            self.api_url.clone(),
            self.collection.clone(),
            number(self.shard),
            number(self.shards),
        ]
    }

    /// The keys of a node's gossiped state; `None` for a node that does not speak rankd's keys
    /// (yet: its first key-values may arrive after its heartbeat).
    pub fn of_state(state: &NodeState) -> Option<NodeKeys> {
        let number = |k: &str| state.get(k).and_then(|v| v.parse::<u64>().ok());
        Some(NodeKeys {
            role: state.get(keys::ROLE)?.to_string(),
            api_url: state.get(keys::API_URL)?.to_string(),
            collection: state.get(keys::COLLECTION).unwrap_or("").to_string(),
            shard: number(keys::SHARD).and_then(|s| u32::try_from(s).ok()),
            shards: number(keys::SHARDS).and_then(|s| u32::try_from(s).ok()),
            generation: number(keys::GENERATION),
            ready: state.get(keys::READY) == Some("1"),
        })
    }
}

/// One live member of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub node_id: String,
    pub gossip_addr: SocketAddr,
    pub keys: NodeKeys,
}

/// The live members, as the failure detector sees them now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// Sorted by node id.
    pub members: Vec<Member>,
}

impl ClusterView {
    /// The live members whose keys are read, and how many were ignored because `key` is set
    /// and their tag does not verify (`super::gossip_auth`).
    fn of_live(
        live: &BTreeMap<ChitchatId, NodeState>,
        key: Option<&[u8; 32]>,
    ) -> (ClusterView, usize) {
        let mut ignored = 0;
        let mut members: Vec<Member> = live
            .iter()
            .filter_map(|(id, state)| {
                let keys = NodeKeys::of_state(state)?;
                if let Some(key) = key {
                    let tag = state.get(super::gossip_auth::AUTH).unwrap_or("");
                    if !super::gossip_auth::verify(key, id, &keys.claims(), tag) {
                        ignored += 1;
                        return None;
                    }
                }
                Some(Member {
                    node_id: id.node_id.to_string(),
                    gossip_addr: id.gossip_advertise_addr,
                    keys,
                })
            })
            .collect();
        members.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        (ClusterView { members }, ignored)
    }

    /// The live, ready leaves serving `shard` of `collection`: their base URLs in rendezvous
    /// order for the shard.
    pub fn replicas(&self, collection: &str, shard: u32) -> Vec<String> {
        let urls: Vec<String> = self
            .members
            .iter()
            .filter(|m| {
                m.keys.role == "leaf"
                    && m.keys.ready
                    && m.keys.collection == collection
                    && m.keys.shard == Some(shard)
            })
            .map(|m| m.keys.api_url.clone())
            .collect();
        placement::ordered(&placement::shard_key(collection, shard), &urls)
    }

    /// The shard count the live leaves of `collection` announce: `Err` when they disagree
    /// (two collections under one name), `Ok(None)` when none announces one.
    pub fn announced_shards(&self, collection: &str) -> Result<Option<u32>, String> {
        let mut counts: Vec<(u32, &str)> = self
            .members
            .iter()
            .filter(|m| m.keys.collection == collection)
            .filter_map(|m| Some((m.keys.shards?, m.node_id.as_str())))
            .collect();
        counts.sort();
        match (counts.first(), counts.last()) {
            (Some(a), Some(b)) if a.0 != b.0 => Err(format!(
                "the leaves of collection {collection:?} disagree on its shard count: \
                 {} says {}, {} says {}",
                a.1, a.0, b.1, b.0
            )),
            (Some(a), _) => Ok(Some(a.0)),
            _ => Ok(None),
        }
    }
}

/// The replicas a root searches, per shard of `collection`: the live, ready leaves of the
/// view; for a shard of which the view knows none, the replicas the metastore's last known
/// `map` records as serving (a root that gossip has cut off still tries them, its own
/// failover skipping those that do not answer). Both in rendezvous order.
pub(crate) fn replica_map(
    view: &ClusterView,
    map: Option<&super::metastore::ClusterMap>,
    collection: &str,
    shards: u32,
) -> Vec<Vec<String>> {
    (0..shards)
        .map(|s| {
            let live = view.replicas(collection, s);
            match map {
                Some(m) if live.is_empty() => placement::ordered(
                    &placement::shard_key(collection, s),
                    &m.replica_urls(collection, s),
                ),
                _ => live,
            }
        })
        .collect()
}

/// How a node joins the gossip.
#[derive(Debug, Clone)]
pub struct MembershipConfig {
    /// Unique in the cluster; a restarted node keeps its id and gets a new generation.
    pub node_id: String,
    /// Gossips only with nodes of the same cluster id.
    pub cluster_id: String,
    /// The UDP address to listen on.
    pub listen: SocketAddr,
    /// The address peers reach it at (the listen address unless behind NAT).
    pub advertise: SocketAddr,
    /// `host:port` of nodes to join through (any live member will do).
    pub seeds: Vec<String>,
    pub gossip_interval: Duration,
    /// chitchat's phi threshold: with phi ≈ elapsed / mean heartbeat interval, a node is
    /// declared dead after about `phi_threshold` mean intervals of silence.
    pub phi_threshold: f64,
    /// Signs this node's keys and verifies the others' (`super::gossip_auth`); `None`
    /// (`--insecure-cluster`): every member is read.
    pub key: Option<[u8; 32]>,
}

impl MembershipConfig {
    /// Defaults for a node listening (and reached) at `gossip`.
    pub fn new(node_id: String, gossip: SocketAddr, seeds: Vec<String>) -> MembershipConfig {
        MembershipConfig {
            node_id,
            cluster_id: "rankd".to_string(),
            listen: gossip,
            advertise: gossip,
            seeds,
            gossip_interval: Duration::from_millis(100),
            phi_threshold: 8.0,
            key: None,
        }
    }
}

/// A running chitchat instance and the live view it maintains.
pub struct Membership {
    handle: ChitchatHandle,
    view: watch::Receiver<Arc<ClusterView>>,
    watcher: tokio::task::JoinHandle<()>,
}

impl Membership {
    /// Joins the gossip with `keys` (within a tokio runtime).
    pub async fn start(config: MembershipConfig, keys: &NodeKeys) -> anyhow::Result<Membership> {
        let generation = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        let id = ChitchatId::new(config.node_id.clone(), generation, config.advertise);
        let chitchat_config = ChitchatConfig {
            chitchat_id: id,
            cluster_id: config.cluster_id.clone(),
            gossip_interval: config.gossip_interval,
            listen_addr: config.listen,
            seed_nodes: config.seeds.clone(),
            failure_detector_config: chitchat::FailureDetectorConfig {
                phi_threshold: config.phi_threshold,
                // The prior mean heartbeat interval: chitchat's default (5 s) would make the
                // first detections take 40 s.
                initial_interval: config.gossip_interval * 2,
                dead_node_grace_period: Duration::from_secs(3600),
                ..Default::default()
            },
            marked_for_deletion_grace_period: Duration::from_secs(3600),
            catchup_callback: None,
            extra_liveness_predicate: None,
            // V1 only once every node can decode it; all rankd nodes run the same chitchat.
            protocol_version: chitchat::ProtocolVersion::V0,
        };
        let mut key_values = keys.key_values();
        if let Some(key) = &config.key {
            let tag = super::gossip_auth::tag(key, &chitchat_config.chitchat_id, &keys.claims());
            key_values.push((super::gossip_auth::AUTH.to_string(), tag));
        }
        let handle = spawn_chitchat(chitchat_config, key_values, &UdpTransport)
            .await
            .with_context(|| {
                format!(
                    "cannot start gossip on UDP {} (node {:?})",
                    config.listen, config.node_id
                )
            })?;
        let mut live = handle.chitchat().lock().await.live_nodes_watcher();
        let key = config.key;
        let read = move |live: &BTreeMap<ChitchatId, NodeState>| {
            let (view, ignored) = ClusterView::of_live(live, key.as_ref());
            crate::metrics::set_live_members(view.members.len());
            crate::metrics::set_unauthenticated_members(ignored);
            if ignored > 0 {
                tracing::warn!(
                    "ignoring {ignored} gossip member(s) whose cluster-key tag is wrong or missing"
                );
            }
            view
        };
        let first = Arc::new(read(&live.borrow_and_update()));
        let (tx, view) = watch::channel(first);
        let watcher = tokio::spawn(async move {
            while live.changed().await.is_ok() {
                let next = read(&live.borrow_and_update());
                tx.send_if_modified(|v| {
                    let changed = **v != next;
                    if changed {
                        *v = Arc::new(next.clone());
                    }
                    changed
                });
            }
        });
        Ok(Membership {
            handle,
            view,
            watcher,
        })
    }

    /// The live view, updated as members come, go or change their keys.
    pub fn view(&self) -> watch::Receiver<Arc<ClusterView>> {
        self.view.clone()
    }

    /// Sets one of this node's keys (spread with the next gossip rounds).
    pub async fn set(&self, key: &str, value: &str) {
        self.handle
            .with_chitchat(|c| c.self_node_state().set(key, value))
            .await;
    }

    /// Leaves the gossip: the others declare this node dead after their failure detector's
    /// delay (chitchat has no goodbye message).
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.watcher.abort();
        self.handle.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn leaf(shard: u32, port: u16) -> NodeKeys {
        NodeKeys {
            role: "leaf".into(),
            api_url: format!("http://127.0.0.1:{port}"),
            collection: "c".into(),
            shard: Some(shard),
            shards: Some(2),
            generation: Some(1),
            ready: true,
        }
    }

    fn root_keys() -> NodeKeys {
        NodeKeys {
            role: "root".into(),
            api_url: "http://127.0.0.1:1".into(),
            collection: "c".into(),
            shard: None,
            shards: None,
            generation: None,
            ready: true,
        }
    }

    fn config(i: u16, seed: u16) -> MembershipConfig {
        let addr: SocketAddr = format!("127.0.0.1:{}", 27_100 + i).parse().unwrap();
        let mut c = MembershipConfig::new(
            format!("node-{i}"),
            addr,
            vec![format!("127.0.0.1:{}", 27_100 + seed)],
        );
        c.gossip_interval = Duration::from_millis(50);
        c
    }

    async fn wait_for(
        view: &mut watch::Receiver<Arc<ClusterView>>,
        what: &str,
        ok: impl Fn(&ClusterView) -> bool,
    ) -> Duration {
        let start = Instant::now();
        let found = matches!(
            tokio::time::timeout(Duration::from_secs(20), view.wait_for(|v| ok(v))).await,
            Ok(Ok(_))
        );
        assert!(found, "{what}: not within 20 s; view {:?}", view.borrow());
        start.elapsed()
    }

    /// Four nodes over loopback UDP: joining nodes appear in the root's view, a key change
    /// spreads, a stopped node is declared dead by chitchat's detector (the time printed).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn join_change_and_death_reach_the_view() {
        let root_keys = root_keys();
        let root = Membership::start(config(0, 0), &root_keys).await.unwrap();
        let mut view = root.view();
        let a = Membership::start(config(1, 0), &leaf(0, 9001))
            .await
            .unwrap();
        let b = Membership::start(config(2, 0), &leaf(0, 9002))
            .await
            .unwrap();
        let c = Membership::start(config(3, 0), &leaf(1, 9003))
            .await
            .unwrap();
        let joined = wait_for(&mut view, "three leaves join", |v| {
            v.replicas("c", 0).len() == 2 && v.replicas("c", 1).len() == 1
        })
        .await;
        println!("three leaves in the root's view after {joined:?}");
        assert_eq!(view.borrow().announced_shards("c"), Ok(Some(2)));
        // HRW order of the shard, not join order.
        let both = view.borrow().replicas("c", 0);
        let expected = placement::ordered(
            &placement::shard_key("c", 0),
            &["http://127.0.0.1:9001", "http://127.0.0.1:9002"],
        );
        assert_eq!(both, expected);

        b.set(keys::READY, "0").await;
        let spread = wait_for(&mut view, "not-ready spreads", |v| {
            v.replicas("c", 0) == ["http://127.0.0.1:9001"]
        })
        .await;
        println!("a key change reached the root after {spread:?}");
        b.set(keys::READY, "1").await;
        wait_for(&mut view, "ready again", |v| v.replicas("c", 0).len() == 2).await;

        let stopped = Instant::now();
        a.shutdown().await.unwrap();
        wait_for(&mut view, "a stopped node is declared dead", |v| {
            v.replicas("c", 0) == ["http://127.0.0.1:9002"]
        })
        .await;
        let detection = stopped.elapsed();
        println!("a stopped node left the root's view after {detection:?} (gossip every 50 ms)");
        assert!(detection < Duration::from_secs(10), "{detection:?}");
        for m in [root, b, c] {
            m.shutdown().await.unwrap();
        }
    }

    /// With the cluster key, a root reads only the members that sign their keys with it: a
    /// leaf without the key, or with another, is ignored (and counted), one with it is read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn members_without_the_cluster_key_are_ignored() {
        let key = Some([3u8; 32]);
        let keyed = |i, shard, port, key| {
            let mut c = config(i, 10);
            c.key = key;
            (c, leaf(shard, port))
        };
        let root_keys = root_keys();
        let mut rc = config(10, 10);
        rc.key = key;
        let root = Membership::start(rc, &root_keys).await.unwrap();
        let mut view = root.view();
        let mut others = Vec::new();
        for (c, k) in [
            keyed(11, 0, 9101, key),
            keyed(12, 0, 9102, None),
            keyed(13, 1, 9103, Some([4u8; 32])),
        ] {
            others.push(Membership::start(c, &k).await.unwrap());
        }
        wait_for(&mut view, "the keyed leaf joins", |v| {
            v.replicas("c", 0) == ["http://127.0.0.1:9101"]
        })
        .await;
        // The two others gossip too: wait until the root has heard of them, then check they
        // stay out of its view.
        let heard = Instant::now();
        loop {
            let live = root.handle.chitchat().lock().await.live_nodes().count();
            if live == 4 {
                break;
            }
            assert!(
                heard.elapsed() < Duration::from_secs(20),
                "{live} live nodes"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let v = view.borrow().clone();
        assert_eq!(v.replicas("c", 0), ["http://127.0.0.1:9101"]);
        assert!(v.replicas("c", 1).is_empty(), "{v:?}");
        for m in others.into_iter().chain([root]) {
            m.shutdown().await.unwrap();
        }
    }

    /// Live, ready leaves first; the metastore's serving replicas only for a shard the view
    /// knows no replica of.
    #[test]
    fn replica_map_falls_back_to_the_metastore_per_shard() {
        use super::super::metastore::*;
        let member = |id: &str, shard, ready| Member {
            node_id: id.into(),
            gossip_addr: "127.0.0.1:1".parse().unwrap(),
            keys: NodeKeys {
                ready,
                ..leaf(shard, 9000 + shard as u16)
            },
        };
        let view = ClusterView {
            members: vec![member("a", 0, true), member("b", 1, false)],
        };
        let node = |id: &str, port: u16| NodeRecord {
            node_id: id.into(),
            role: "leaf".into(),
            api_url: format!("http://10.0.0.1:{port}"),
            gossip_addr: String::new(),
            registered_at: 0,
        };
        let replica = |id: &str, state| ReplicaRecord {
            node_id: id.into(),
            state,
        };
        let map = ClusterMap {
            collections: vec![CollectionRecord {
                name: "c".into(),
                hash_scheme: super::super::routing::HASH_SCHEME.into(),
                shards: vec![
                    ShardRecord {
                        shard: 0,
                        current_generation: None,
                        manifest_key: None,
                        replicas: vec![replica("x", ReplicaState::Serving)],
                    },
                    ShardRecord {
                        shard: 1,
                        current_generation: None,
                        manifest_key: None,
                        replicas: vec![
                            replica("x", ReplicaState::Fetching),
                            replica("y", ReplicaState::Serving),
                        ],
                    },
                ],
            }],
            nodes: vec![node("x", 1), node("y", 2)],
            read_at: 0,
        };
        assert_eq!(
            replica_map(&view, Some(&map), "c", 2),
            [vec!["http://127.0.0.1:9000"], vec!["http://10.0.0.1:2"]]
        );
        assert_eq!(
            replica_map(&view, None, "c", 2),
            [vec!["http://127.0.0.1:9000"], vec![]]
        );
    }

    #[test]
    fn announced_shards_disagreeing() {
        let member = |id: &str, shards| Member {
            node_id: id.into(),
            gossip_addr: "127.0.0.1:1".parse().unwrap(),
            keys: NodeKeys {
                shards: Some(shards),
                ..leaf(0, 1)
            },
        };
        let view = ClusterView {
            members: vec![member("x", 2), member("y", 3)],
        };
        let err = view.announced_shards("c").unwrap_err();
        assert!(err.contains("disagree"), "{err}");
        assert_eq!(view.announced_shards("other"), Ok(None));
    }
}
