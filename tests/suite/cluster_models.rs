//! Models on roots (issue 31, deliverable 6): a collection's rerankers are uploaded,
//! activated and rolled back through any root and served by every root of the collection,
//! which follow the registry in the metastore (`rankd::cluster::models`); a root restarted
//! with an old `--model` does not undo an activation made since; a lone root keeps its
//! registry in its own database across restarts. Real processes on loopback: three Cranfield
//! leaves and two roots by gossip, and a root given its shards.
//!
//! The metastore is PostgreSQL when `RANKD_TEST_DATABASE_URL` is set, else SQLite.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::util::*;
use serde_json::Value;

const TOKEN: &str = "models-test-token";

fn root(port: u16, seeds: &str, data: &Path, metastore: &str, more: &[&str]) -> Server {
    let gossip = gossip(port);
    let mut args = vec![
        "--role",
        "root",
        "--collection",
        "cranfield",
        "--gossip",
        &gossip,
        "--seed",
        seeds,
        "--data-dir",
        data.to_str().unwrap(),
        "--metastore",
        metastore,
    ];
    args.extend(more);
    start_serve(&args, Some(TOKEN), &[])
}

/// The model the root at `base` reranks with, as `GET /admin/models` says.
fn serving(base: &str) -> Value {
    let list = get(&format!("{base}/admin/models"), Some(TOKEN));
    assert_eq!(list.status, 200, "{}", list.body);
    list.body["serving"].clone()
}

/// Waits until the root at `base` serves `id`, within `within`; the time it took.
fn served_within(base: &str, id: &str, within: Duration) -> Duration {
    let start = Instant::now();
    while serving(base) != id {
        assert!(
            start.elapsed() < within,
            "{base} still serves {} instead of {id} after {within:?}",
            serving(base)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

/// The reranker a default search on `base` names.
fn search_reranker(base: &str) -> Value {
    let a = get(&format!("{base}/search?q=boundary+layer+flow&k=5"), None);
    assert_eq!(a.status, 200, "{}", a.body);
    a.body["reranker"].clone()
}

fn train(single: &Path, epochs: u32, out: &Path) -> String {
    let input = cranfield_dir();
    train_model(
        single,
        &input.join("cran.qry"),
        &input.join("cranqrel"),
        epochs,
        &["--format", "cranfield"],
        out,
    )["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn every_root_serves_the_collections_active_model() {
    let dir = tempfile::tempdir().unwrap();
    let metastore = fresh_database(dir.path());
    let (single, sharded) = (dir.path().join("single"), dir.path().join("sharded"));
    ingest_into("cranfield", &cranfield_dir(), &single, None);
    ingest_into("cranfield", &cranfield_dir(), &sharded, Some(3));
    let (m1, m2) = (dir.path().join("m1.json"), dir.path().join("m2.json"));
    let (id1, id2) = (train(&single, 2, &m1), train(&single, 3, &m2));
    assert_ne!(id1, id2);

    let seeds = format!("{},{}", gossip(27_280), gossip(27_281));
    let _leaves: Vec<Server> = (0..3)
        .map(|s| {
            let data = sharded.join(format!("shards/{s}"));
            gossip_leaf(
                &data,
                "cranfield",
                s,
                27_282 + s as u16,
                &seeds,
                Some(&metastore),
            )
        })
        .collect();
    // Root A registers and activates its --model (the collection has none); B serves it too.
    let a = root(
        27_280,
        &seeds,
        &dir.path().join("root-a"),
        &metastore,
        &["--model", m1.to_str().unwrap()],
    );
    let b_dir = dir.path().join("root-b");
    let b = root(27_281, &seeds, &b_dir, &metastore, &[]);
    assert_eq!(serving(&a.base), id1.as_str());
    assert_eq!(serving(&b.base), id1.as_str());
    assert_eq!(search_reranker(&b.base), id1.as_str());

    // Uploaded and activated through B: B serves it at once, A within its follow interval.
    let bytes = std::fs::read(&m2).unwrap();
    let up = call(
        "POST",
        &format!("{}/admin/models", b.base),
        Some(TOKEN),
        Some(("application/octet-stream", &bytes)),
    );
    assert_eq!(up.status, 201, "{}", up.body);
    assert_eq!(up.body["model"], id2.as_str());
    let again = call(
        "POST",
        &format!("{}/admin/models", a.base),
        Some(TOKEN),
        Some(("application/octet-stream", &bytes)),
    );
    assert_eq!(again.status, 409, "the same content twice: {}", again.body);
    let on = post_json(
        &format!("{}/admin/models/{id2}/activate", b.base),
        Some(TOKEN),
        "",
    );
    assert_eq!(on.status, 200, "{}", on.body);
    assert_eq!(on.body["previous"], id1.as_str());
    assert_eq!(serving(&b.base), id2.as_str());
    let took = served_within(&a.base, &id2, Duration::from_secs(5));
    eprintln!("the other root served the activation after {took:?}");
    assert_eq!(search_reranker(&a.base), id2.as_str());
    let list = get(&format!("{}/admin/models", a.base), Some(TOKEN)).body;
    assert_eq!(list["active"], id2.as_str());
    assert_eq!(list["models"].as_array().unwrap().len(), 2, "{list}");

    // Rolled back through A: both serve the first model again.
    let back = post_json(
        &format!("{}/admin/models/rollback", a.base),
        Some(TOKEN),
        "",
    );
    assert_eq!(back.status, 200, "{}", back.body);
    assert_eq!(back.body["active"], id1.as_str());
    served_within(&b.base, &id1, Duration::from_secs(5));

    // Refusals, each naming the reason; nothing changes.
    let missing = post_json(
        &format!("{}/admin/models/nope/activate", a.base),
        Some(TOKEN),
        "",
    );
    assert_eq!(missing.status, 404, "{}", missing.body);
    let active = call(
        "DELETE",
        &format!("{}/admin/models/{id1}", a.base),
        Some(TOKEN),
        None,
    );
    assert_eq!(active.status, 409, "{}", active.body);
    let junk = call(
        "POST",
        &format!("{}/admin/models", a.base),
        Some(TOKEN),
        Some(("application/octet-stream", b"not a model")),
    );
    assert_eq!(junk.status, 400, "{}", junk.body);
    let anonymous = get(&format!("{}/admin/models", a.base), None);
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);

    // B restarted with the other model's file: the collection's active model stays.
    b.stop();
    let b = root(
        27_281,
        &seeds,
        &b_dir,
        &metastore,
        &["--model", m2.to_str().unwrap()],
    );
    assert_eq!(serving(&b.base), id1.as_str());
    assert_eq!(serving(&a.base), id1.as_str());

    // An inactive model is deleted; the registry lists it no more, on either root.
    let gone = call(
        "DELETE",
        &format!("{}/admin/models/{id2}", b.base),
        Some(TOKEN),
        None,
    );
    assert_eq!(gone.status, 204, "{}", gone.body);
    let list = get(&format!("{}/admin/models", a.base), Some(TOKEN)).body;
    assert_eq!(list["models"].as_array().unwrap().len(), 1, "{list}");

    // A root given its shards keeps its own registry in its database, across a restart.
    let shards: Vec<String> = _leaves.iter().map(|l| l.base.clone()).collect();
    let lone_dir = dir.path().join("root-lone");
    let lone = |model: Option<&Path>| {
        let mut args = vec![
            "--role".to_string(),
            "root".into(),
            "--data-dir".into(),
            lone_dir.to_str().unwrap().into(),
        ];
        for s in &shards {
            args.extend(["--shard".into(), s.clone()]);
        }
        if let Some(m) = model {
            args.extend(["--model".into(), m.to_str().unwrap().into()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        start_serve(&args, Some(TOKEN), &[])
    };
    let one = lone(Some(&m1));
    assert_eq!(serving(&one.base), id1.as_str());
    let up = call(
        "POST",
        &format!("{}/admin/models", one.base),
        Some(TOKEN),
        Some(("application/octet-stream", &bytes)),
    );
    assert_eq!(up.status, 201, "{}", up.body);
    let on = post_json(
        &format!("{}/admin/models/{id2}/activate", one.base),
        Some(TOKEN),
        "",
    );
    assert_eq!(on.status, 200, "{}", on.body);
    one.stop();
    let one = lone(Some(&m1));
    assert_eq!(serving(&one.base), id2.as_str());
    assert_eq!(search_reranker(&one.base), id2.as_str());
}
