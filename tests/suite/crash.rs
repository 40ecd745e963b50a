//! Crash tests: `kill -9` at seeded random moments during every write rankd makes (a
//! `rankd ingest`, admin document batches and deletions, the graph job, the training job,
//! model activation, `rankd embed`), then a restart, and checks that what is on disk is a
//! committed state:
//!
//! - the documents are those of every acknowledged write, plus the write in flight at the
//!   kill entirely or not at all, and the manifest counts them;
//! - after the restart no temporary file and no uncommitted segment file is left;
//! - the link-score file is the old one byte for byte or a complete new one, and so is the
//!   document-vector file (`vectors.bin`);
//! - the model registry names exactly one active model (none while none was ever activated),
//!   it is the last acknowledged activation or the one in flight, every registered model file
//!   loads, and the server serves the active one.
//!
//! Each operation is measured once, then killed 20 times after a delay drawn from a seeded RNG
//! over that duration. `RANKD_CRASH_SEED` changes the seed; a failure names the seed, the round
//! and the delay, so it can be replayed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::util::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

/// Kills per operation.
const ROUNDS: usize = 20;

fn seed() -> u64 {
    std::env::var("RANKD_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16)
}

/// The RNG of one test: the seed mixed with the test's name, so tests draw different delays.
fn rng(test: &str) -> ChaCha8Rng {
    let salt = test
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    ChaCha8Rng::seed_from_u64(seed() ^ salt)
}

/// A delay in `[0, span)`.
fn delay(rng: &mut ChaCha8Rng, span: Duration) -> Duration {
    span.mul_f64(rng.random::<f64>())
}

/// Starts the server after a crash and checks that the restart left no temporary or orphan
/// file; `context` names the round for the failure message.
fn restart(data: &Path, db: &str, context: &str) -> Server {
    let server = start(data, db, Some(TOKEN));
    let left = leftovers(data);
    assert!(
        left.is_empty(),
        "{context}: left after the restart: {left:?}"
    );
    server
}

fn jsonl(docs: &[(String, String)]) -> String {
    docs.iter()
        .map(|(id, title)| {
            json!({
                "id": id, "title": title, "url": format!("https://x.org/{id}"),
                "body": format!("{title} body text for {id}"),
                "links": [format!("https://x.org/{}", id.chars().rev().collect::<String>())],
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn apply(state: &mut BTreeMap<String, String>, op: &Op) {
    match op {
        Op::Upsert(docs) => state.extend(docs.iter().cloned()),
        Op::Delete(ids) => {
            for id in ids {
                state.remove(id);
            }
        }
    }
}

/// A document write: a batch of (id, title), or a deletion of ids.
#[derive(Debug, Clone)]
enum Op {
    Upsert(Vec<(String, String)>),
    Delete(Vec<String>),
}

/// Asserts that `found` is `before` or `before` with `in_flight` applied.
fn assert_committed(
    found: &BTreeMap<String, String>,
    before: &BTreeMap<String, String>,
    in_flight: Option<&Op>,
    context: &str,
) {
    if found == before {
        return;
    }
    if let Some(op) = in_flight {
        let mut after = before.clone();
        apply(&mut after, op);
        if *found == after {
            return;
        }
    }
    let missing: Vec<_> = before.keys().filter(|k| !found.contains_key(*k)).collect();
    let extra: Vec<_> = found.keys().filter(|k| !before.contains_key(*k)).collect();
    let changed: Vec<_> = found
        .iter()
        .filter(|(k, v)| before.get(*k).is_some_and(|b| b != *v))
        .map(|(k, _)| k)
        .collect();
    panic!(
        "{context}: the index is no committed state: missing {missing:?}, extra {extra:?}, \
         changed {changed:?} (in flight: {in_flight:?})"
    );
}

/// `rankd ingest` of a 1500-document JSONL file (new documents, and a new title for one
/// existing document), killed at random: the index is as before or holds the whole file.
#[test]
fn ingest_killed_at_random_leaves_a_committed_index() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let mut state = documents(&data);
    let mut rng = rng("ingest");
    let batch = |round: usize| -> Vec<(String, String)> {
        let mut docs: Vec<_> = (0..1500)
            .map(|i| (format!("r{round}-{i}"), format!("round {round} doc {i}")))
            .collect();
        docs.push(("vec".into(), format!("vec of round {round}")));
        docs
    };
    let ingest_cmd = |file: &Path, data: &Path| {
        let mut c = rankd_command();
        c.args(["ingest", "--format", "jsonl", "--json", "--input"])
            .arg(file)
            .arg("--data-dir")
            .arg(data)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    // The measured run, into a copy of the index.
    let measured = tempfile::tempdir().unwrap();
    let copy = ingest(measured.path(), DOCS);
    let file = dir.path().join("batch.jsonl");
    std::fs::write(&file, jsonl(&batch(999))).unwrap();
    let t = Instant::now();
    assert!(ingest_cmd(&file, &copy).status().unwrap().success());
    // One measuring run on a shared machine can be slow; a kill that finds the ingest already
    // finished shrinks the span, so the kills stay spread over the run as it now takes.
    let mut span = t.elapsed().mul_f64(1.2);

    let mut interrupted = 0;
    for round in 0..ROUNDS {
        let docs = batch(round);
        std::fs::write(&file, jsonl(&docs)).unwrap();
        let wait = delay(&mut rng, span);
        let context = format!("seed {}, round {round}, kill after {wait:?}", seed());
        let mut child = ingest_cmd(&file, &data).spawn().unwrap();
        std::thread::sleep(wait);
        let finished = child.try_wait().unwrap().is_some();
        kill9(&mut child);
        interrupted += usize::from(!finished);
        if finished {
            span = span.mul_f64(0.8);
        }
        restart(&data, &db, &context).stop();
        let found = documents(&data);
        let op = Op::Upsert(docs);
        if finished {
            apply(&mut state, &op);
            assert_committed(&found, &state, None, &context);
        } else {
            assert_committed(&found, &state, Some(&op), &context);
        }
        state = found;
    }
    eprintln!("ingest: {interrupted} of {ROUNDS} kills interrupted it (span {span:?})");
    assert!(interrupted >= ROUNDS / 2, "the kills came too late");
}

/// The documents as the client saw them: every acknowledged write applied, and the write it
/// was waiting for when the server died.
#[derive(Default)]
struct Client {
    acked: BTreeMap<String, String>,
    in_flight: Option<Op>,
    acknowledged_writes: usize,
}

/// Sends batches of 200 documents and deletions of 50 until the server dies; records each
/// write before sending it and moves it into the acknowledged state on 200.
fn write_until_killed(base: String, round: usize, client: Arc<Mutex<Client>>) {
    for n in 0.. {
        let op = {
            let mut c = client.lock().unwrap();
            let op = if n % 3 == 2 {
                Op::Delete(c.acked.keys().rev().take(50).cloned().collect())
            } else {
                let mut docs: Vec<_> = (0..200)
                    .map(|i| (format!("b{round}-{n}-{i}"), format!("batch {round}/{n}")))
                    .collect();
                // Replaces an existing document, so a torn batch would show as a mixed state.
                if let Some(id) = c.acked.keys().next().cloned() {
                    docs.push((id, format!("replaced in {round}/{n}")));
                }
                Op::Upsert(docs)
            };
            c.in_flight = Some(op.clone());
            op
        };
        let answer = match &op {
            Op::Upsert(docs) => try_call(
                "POST",
                &format!("{base}/admin/documents"),
                Some(TOKEN),
                Some(("application/x-ndjson", jsonl(docs).as_bytes())),
            ),
            Op::Delete(ids) => try_call(
                "POST",
                &format!("{base}/admin/documents/delete"),
                Some(TOKEN),
                Some((
                    "application/json",
                    json!({ "ids": ids }).to_string().as_bytes(),
                )),
            ),
        };
        let Ok(answer) = answer else { return };
        assert_eq!(answer.status, 200, "{}", answer.body);
        let mut c = client.lock().unwrap();
        let op = c.in_flight.take().unwrap();
        apply(&mut c.acked, &op);
        c.acknowledged_writes += 1;
    }
}

/// Runs [`write_until_killed`] against `server` and kills the server after `wait` (or, with
/// `until_writes`, once that many writes were acknowledged); returns what the client saw.
fn writes_then_kill(
    server: &mut Server,
    round: usize,
    state: &BTreeMap<String, String>,
    wait: Duration,
    until_writes: Option<usize>,
) -> Client {
    let client = Arc::new(Mutex::new(Client {
        acked: state.clone(),
        ..Client::default()
    }));
    let writer = {
        let (base, client) = (server.base.clone(), client.clone());
        std::thread::spawn(move || write_until_killed(base, round, client))
    };
    match until_writes {
        Some(n) => {
            while client.lock().unwrap().acknowledged_writes < n {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        None => std::thread::sleep(wait),
    }
    kill9(&mut server.child);
    writer.join().unwrap();
    Arc::into_inner(client).unwrap().into_inner().unwrap()
}

/// Admin document batches and deletions against a running server, which is killed at random:
/// after a restart the index holds every acknowledged write, and the one in flight entirely
/// or not at all.
#[test]
fn admin_batches_and_deletes_killed_at_random_lose_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let mut rng = rng("admin documents");
    let mut state = documents(&data);

    // Measures six writes (and checks the kill that ends them like any other).
    let mut server = start(&data, &db, Some(TOKEN));
    let t = Instant::now();
    let c = writes_then_kill(&mut server, 999, &state, Duration::ZERO, Some(6));
    let span = t.elapsed();
    server = restart(&data, &db, "measuring run");
    state = documents(&data);
    assert_committed(&state, &c.acked, c.in_flight.as_ref(), "measuring run");

    let mut acknowledged = 0;
    for round in 0..ROUNDS {
        let wait = delay(&mut rng, span);
        let context = format!("seed {}, round {round}, kill after {wait:?}", seed());
        let c = writes_then_kill(&mut server, round, &state, wait, None);
        server = restart(&data, &db, &context);
        let found = documents(&data);
        assert_committed(&found, &c.acked, c.in_flight.as_ref(), &context);
        acknowledged += c.acknowledged_writes;
        state = found;
    }
    server.stop();
    eprintln!(
        "admin documents: {acknowledged} writes acknowledged over {ROUNDS} kills \
         (span {span:?})"
    );
    // The kill delays are drawn over the measuring run's span; on a loaded machine later
    // writes are slower than measured, so expect writes in about half the rounds, not more
    // (17 over 20 rounds was seen beside a full test run on 2 cores).
    assert!(
        acknowledged >= ROUNDS / 2,
        "the kills came too early: {acknowledged} writes acknowledged over {ROUNDS} kills"
    );
}

/// A corpus whose graph job takes a noticeable time: `n` documents, each linking to five
/// others.
fn linked_corpus(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            json!({
                "id": format!("p{i}"), "url": format!("https://x.org/p{i}"),
                "title": format!("page {i}"), "body": format!("page {i} of the linked corpus"),
                "links": (1..=5).map(|k| format!("https://x.org/p{}", (i * 7 + k * 13) % n))
                    .collect::<Vec<_>>(),
            })
            .to_string()
        })
        .collect()
}

/// The graph job (`POST /admin/graph`) killed at random, each round after a batch that changes
/// the graph: the link-score file is the one from before the job byte for byte, or a complete
/// file written for the index as it is.
#[test]
fn graph_job_killed_at_random_leaves_the_old_or_the_new_link_scores() {
    let dir = tempfile::tempdir().unwrap();
    let docs = linked_corpus(1000);
    let data = ingest(
        dir.path(),
        &docs.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let db = fresh_database(dir.path());
    let file = data.join("link_scores.json");
    let mut rng = rng("graph job");

    // Measures one job.
    let mut server = start(&data, &db, Some(TOKEN));
    let t = Instant::now();
    let job = wait_for_job(&server.base, start_graph_job(&server.base));
    assert_eq!(job["status"], "succeeded", "{job}");
    let span = t.elapsed().mul_f64(1.2);

    let mut outcomes = BTreeMap::<&str, usize>::new();
    for round in 0..ROUNDS {
        let wait = delay(&mut rng, span);
        let context = format!("seed {}, round {round}, kill after {wait:?}", seed());
        // A document with new links changes the graph, so a new file differs from the old.
        let batch = jsonl(&[(format!("p{round}"), format!("page {round} again"))]);
        let a = post_text(
            &format!("{}/admin/documents", server.base),
            Some(TOKEN),
            &batch,
        );
        assert_eq!(a.status, 200, "{}", a.body);
        let before = std::fs::read(&file).unwrap();
        start_graph_job(&server.base);
        std::thread::sleep(wait);
        kill9(&mut server.child);

        let after = std::fs::read(&file).unwrap();
        let index = rankd::text::TextIndex::open(&data, None).unwrap();
        let outcome = if after == before {
            "old"
        } else {
            // `links::load` checks the header, the checksum and that the file was written for
            // the index as it is now.
            match rankd::links::load(&index) {
                Ok(Some(_)) => "new",
                other => panic!(
                    "{context}: the link-score file is neither the old one nor a complete new \
                     one: {:?}",
                    other.err()
                ),
            }
        };
        *outcomes.entry(outcome).or_default() += 1;
        server = restart(&data, &db, &context);
    }
    // The interrupted jobs are marked failed, and a new one runs.
    let interrupted = column(
        &db,
        "SELECT COUNT(*) FROM jobs WHERE status = 'failed' AND error = 'interrupted by restart'",
    );
    let job = wait_for_job(&server.base, start_graph_job(&server.base));
    assert_eq!(job["status"], "succeeded", "{job}");
    server.stop();
    eprintln!(
        "graph job ({span:?} with a 20% margin): outcomes over {ROUNDS} kills {outcomes:?}, \
         jobs marked interrupted {interrupted:?}"
    );
    assert!(outcomes.get("old").copied().unwrap_or(0) > 0);
}

/// Checks the registry after a restart: at most one active model; it is one of `expected`;
/// every registered model file loads; the server serves the active model.
fn assert_registry(base: &str, db: &str, expected: &[Option<String>], context: &str) {
    let active = column(db, "SELECT id FROM models WHERE status = 'active'");
    assert!(
        active.len() <= 1,
        "{context}: several active models {active:?}"
    );
    let active = active.into_iter().next();
    assert!(
        expected.contains(&active),
        "{context}: the active model is {active:?}, expected one of {expected:?}"
    );
    for file in column(db, "SELECT file_path FROM models") {
        if let Err(e) = rankd::rerank::Reranker::load(Path::new(&file)) {
            panic!("{context}: a registered model does not load: {e}");
        }
    }
    let list = get(&format!("{base}/admin/models"), Some(TOKEN));
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(
        list.body["serving"],
        json!(active),
        "{context}: {}",
        list.body
    );
    assert!(
        list.body["load_error"].is_null(),
        "{context}: {}",
        list.body
    );
}

/// The topic corpus with its judgments stored, and a server over it.
fn judged_server(dir: &Path) -> (std::path::PathBuf, String, Server) {
    let (data, db, server) = topic_server(dir, true);
    let a = post_json(
        &format!("{}/admin/judgments", server.base),
        Some(TOKEN),
        &topic_judgments(),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    (data, db, server)
}

/// Training settings; each seed trains a model of its own id.
fn train_settings(seed: usize) -> String {
    format!(r#"{{"model":"mlp","epochs":40,"hidden":[16],"seed":{seed}}}"#)
}

/// The training job (`POST /admin/train`) killed at random: after a restart no temporary file
/// is left in the models directory, every registered model loads and no model became active.
#[test]
fn training_job_killed_at_random_leaves_a_consistent_registry() {
    let dir = tempfile::tempdir().unwrap();
    let (data, db, mut server) = judged_server(dir.path());
    let mut rng = rng("training job");

    // Measured on a fresh server, as every round runs on one; some kills must come after the
    // model file is written and registered.
    server.stop();
    server = start(&data, &db, Some(TOKEN));
    let t = Instant::now();
    train_job(&server.base, &train_settings(1000));
    let span = t.elapsed().mul_f64(1.5);

    for round in 0..ROUNDS {
        let wait = delay(&mut rng, span);
        let context = format!("seed {}, round {round}, kill after {wait:?}", seed());
        let settings = train_settings(round);
        let a = post_json(
            &format!("{}/admin/train", server.base),
            Some(TOKEN),
            &settings,
        );
        assert_eq!(a.status, 202, "{context}: {}", a.body);
        std::thread::sleep(wait);
        kill9(&mut server.child);
        server = restart(&data, &db, &context);
        assert_registry(&server.base, &db, &[None], &context);
    }
    let models = column(&db, "SELECT COUNT(*) FROM models");
    let files = rankd::search::model::model_files(&data).unwrap().len();
    server.stop();
    eprintln!(
        "training job (kills over {span:?}): {models:?} models registered, {files} model \
         files after {ROUNDS} kills"
    );
}

/// Model activations (`POST /admin/models/{id}/activate`) in a loop, the server killed at
/// random: after a restart the registry's one active model is the last acknowledged
/// activation or the one in flight, and it is served.
#[test]
fn activation_killed_at_random_leaves_one_active_model() {
    let dir = tempfile::tempdir().unwrap();
    let (data, db, mut server) = judged_server(dir.path());
    let mut rng = rng("activation");
    let ids: Vec<String> = (1..=3)
        .map(|seed| {
            train_job(
                &server.base,
                &format!(r#"{{"model":"linear","epochs":5,"seed":{seed}}}"#),
            )
        })
        .collect();
    let activate = |base: &str, id: &str| {
        try_call(
            "POST",
            &format!("{base}/admin/models/{id}/activate"),
            Some(TOKEN),
            None,
        )
    };
    // Measures three activations; the loop below runs activations back to back.
    let t = Instant::now();
    for id in &ids {
        assert_eq!(activate(&server.base, id).unwrap().status, 200);
    }
    let span = t.elapsed().mul_f64(3.0);
    let mut acked = Some(ids[2].clone());

    let mut activations = 0;
    for round in 0..ROUNDS {
        let wait = delay(&mut rng, span);
        let context = format!("seed {}, round {round}, kill after {wait:?}", seed());
        // (last acknowledged, in flight, count)
        let seen = Arc::new(Mutex::new((acked.clone(), None::<String>, 0usize)));
        let switcher = {
            let (base, seen, ids) = (server.base.clone(), seen.clone(), ids.clone());
            std::thread::spawn(move || {
                for n in round.. {
                    let target = ids[n % 3].clone();
                    if seen.lock().unwrap().0.as_deref() == Some(target.as_str()) {
                        continue;
                    }
                    seen.lock().unwrap().1 = Some(target.clone());
                    let Ok(a) = activate(&base, &target) else {
                        return;
                    };
                    assert_eq!(a.status, 200, "{}", a.body);
                    let mut s = seen.lock().unwrap();
                    *s = (Some(target), None, s.2 + 1);
                }
            })
        };
        std::thread::sleep(wait);
        kill9(&mut server.child);
        switcher.join().unwrap();
        let (last, in_flight, count) = seen.lock().unwrap().clone();
        activations += count;
        server = restart(&data, &db, &context);
        assert_registry(&server.base, &db, &[last, in_flight], &context);
        acked = column(&db, "SELECT id FROM models WHERE status = 'active'")
            .into_iter()
            .next();
    }
    server.stop();
    eprintln!("activation: {activations} activations acknowledged over {ROUNDS} kills");
}

/// A model activation the command line asked for (`rankd train --activate` writes
/// `models/ACTIVE`) survives a start-up that dies before the registry records it: the
/// request is removed only once the activation is committed. The failure is injected with
/// a trigger that makes the registry refuse updates (a kill in that window is too short to
/// hit at random).
#[test]
fn a_command_line_activation_survives_a_start_up_that_fails_to_apply_it() {
    let dir = tempfile::tempdir().unwrap();
    let (data, db, server) = judged_server(dir.path());
    let id = train_job(&server.base, &train_settings(7));
    server.stop();
    let request = data.join("models").join("ACTIVE");
    std::fs::write(&request, format!("{id}.json")).unwrap();
    if db.starts_with("sqlite") {
        sql(
            &db,
            "CREATE TRIGGER refuse BEFORE UPDATE ON models \
             BEGIN SELECT RAISE(FAIL, 'injected failure'); END",
        );
    } else {
        sql(
            &db,
            "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION \
             'injected failure'; END $$ LANGUAGE plpgsql",
        );
        sql(
            &db,
            "CREATE TRIGGER refuse BEFORE UPDATE ON models FOR EACH ROW EXECUTE FUNCTION refuse()",
        );
    }
    let out = rankd_command()
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .args(["--database-url", &db])
        .env("RANKD_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the start-up should fail: {stderr}");
    assert!(stderr.contains("injected failure"), "{stderr}");
    assert!(
        request.exists(),
        "the request was lost with the failed start-up"
    );

    if db.starts_with("sqlite") {
        sql(&db, "DROP TRIGGER refuse");
    } else {
        sql(&db, "DROP TRIGGER refuse ON models");
    }
    let server = start(&data, &db, Some(TOKEN));
    assert_registry(&server.base, &db, &[Some(id)], "after the restart");
    assert!(!request.exists(), "the applied request is removed");
    server.stop();
}

/// `rankd embed` killed at random, each round with the other of two embedders (two tiny
/// static models, so the file's embedder says which run wrote it) over 20,000 documents: the
/// vector file loads whole and is the previous run's or this one's (this one's when it
/// finished), and a restarted server serves it with no temporary file left.
#[test]
fn embed_killed_at_random_leaves_the_old_or_the_new_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let words = [
        "iterate",
        "over",
        "hash",
        "sort",
        "vector",
        "descending",
        "order",
        "string",
        "read",
        "file",
        "line",
        "convert",
        "integer",
        "thread",
        "spawn",
        "wait",
        "rust",
        "borrow",
        "moved",
        "value",
        "error",
        "main",
    ];
    let docs: Vec<String> = (0..20_000)
        .map(|i| {
            let w = |k: usize| words[(i * k + k) % words.len()];
            json!({"id": format!("d{i:05}"), "title": format!("{} {}", w(3), w(7)),
                   "body": format!("{} {} {} {}.", w(11), w(13), w(17), w(5))})
            .to_string()
        })
        .collect();
    let data = ingest(
        dir.path(),
        &docs.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let db = fresh_database(dir.path());
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/embed/model2vec");
    let embedders = [
        fixtures.join("tiny-float32"),
        fixtures.join("tiny-quantized"),
    ];
    let fingerprints: Vec<String> = embedders
        .iter()
        .map(|e| rankd::dense::fingerprint(e).unwrap())
        .collect();
    let embed = |round: usize| {
        let mut c = rankd_command();
        c.args(["embed", "--json", "--data-dir"])
            .arg(&data)
            .arg("--embedder")
            .arg(&embedders[round % 2])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    let stored = |context: &str| -> String {
        let v = rankd::dense::store::read(&rankd::dense::store::path(&data))
            .unwrap_or_else(|e| panic!("{context}: the vector file does not load: {e}"))
            .unwrap_or_else(|| panic!("{context}: no vector file"));
        assert_eq!(v.len(), docs.len(), "{context}");
        v.model
    };
    // The measured run (embedder 1), which also leaves a first file.
    let t = Instant::now();
    assert!(embed(1).status().unwrap().success());
    let mut span = t.elapsed().mul_f64(1.2);
    let mut current = stored("the measured run");
    assert_eq!(current, fingerprints[1]);
    let mut rng = rng("embed");
    let mut interrupted = 0;
    for round in 0..ROUNDS {
        let wait = delay(&mut rng, span);
        let context = format!("seed {}, round {round}, kill after {wait:?}", seed());
        let mut child = embed(round).spawn().unwrap();
        std::thread::sleep(wait);
        let finished = child.try_wait().unwrap().is_some();
        kill9(&mut child);
        interrupted += usize::from(!finished);
        if finished {
            span = span.mul_f64(0.8);
        }
        let found = stored(&context);
        let new = &fingerprints[round % 2];
        if finished {
            assert_eq!(&found, new, "{context}: the run finished");
        } else {
            assert!(
                found == current || &found == new,
                "{context}: the file is neither the old nor the new"
            );
        }
        current = found;
        let server = start_serve(
            &[
                "--data-dir",
                data.to_str().unwrap(),
                "--database-url",
                &db,
                "--no-embed",
            ],
            Some(TOKEN),
            &[],
        );
        let left = leftovers(&data);
        assert!(
            left.is_empty(),
            "{context}: left after the restart: {left:?}"
        );
        let start = Instant::now();
        loop {
            let e = get(&format!("{}/admin/embeddings", server.base), Some(TOKEN)).body;
            if e["state"] == "ready" {
                assert_eq!(
                    e["served"]["documents_with_vector"],
                    docs.len(),
                    "{context}: {e}"
                );
                break;
            }
            assert!(e["state"] != "failed", "{context}: {e}");
            assert!(start.elapsed() < Duration::from_secs(60), "{context}: {e}");
            std::thread::sleep(Duration::from_millis(50));
        }
        server.stop();
    }
    eprintln!("embed: {interrupted} of {ROUNDS} kills interrupted it (span {span:?})");
    assert!(interrupted >= ROUNDS / 2, "the kills came too late");
}
