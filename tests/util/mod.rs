//! The helpers of the integration tests, written once (`tests/tests.rs` and the two binaries
//! beside it include this module):
//!
//! - the command line: [`rankd`], [`rankd_ok`], [`rankd_command`] run the binary under test
//!   ([`rankd_bin`]);
//! - a real `rankd serve` process ([`start`], [`start_serve`]) with a token and a database, an
//!   HTTP client ([`get`], [`post_json`], [`call`]), admin jobs ([`wait_for_job`],
//!   [`train_job`], [`start_graph_job`]), metrics ([`metric`]);
//! - direct SQL access to the server's database (to check state independently of the API and
//!   to stage rows a crash would leave behind): [`sql`], [`column`], [`snapshot`];
//! - data: the shared data sets ([`shared_data`], [`cranfield_dir`]), small corpora as JSON
//!   lines ([`DOCS`], [`topic_corpus`]) or documents ([`word_corpus`]), and what is on disk
//!   ([`documents`], [`leftovers`]).
//!
//! The database is SQLite in the test's data directory, or a fresh PostgreSQL database per
//! test when `RANKD_TEST_DATABASE_URL` names a PostgreSQL server (`.ci/postgres` starts one).

#![allow(dead_code)]

pub mod history;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use sqlx::{Connection, Row};

pub const TOKEN: &str = "test-admin-token-0123456789";

/// Every table of the schema, for before/after snapshots.
pub const TABLES: &[&str] = &[
    "queries",
    "judgments",
    "models",
    "model_activations",
    "jobs",
    "job_logs",
    "trustrank_seeds",
    "label_batches",
    "label_reservations",
    "cluster_collections",
    "cluster_shards",
    "cluster_nodes",
    "cluster_replicas",
    "cluster_generations",
    "experiments",
];

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A connection to the server at `base` from the loopback address `source` (127.0.0.2, say),
/// so the server sees another client than the tests' usual 127.0.0.1.
pub fn connect_from(source: &str, base: &str) -> std::net::TcpStream {
    let to: std::net::SocketAddr = base.strip_prefix("http://").unwrap().parse().unwrap();
    let from: std::net::SocketAddr = format!("{source}:0").parse().unwrap();
    let stream = runtime().block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(from).unwrap();
        socket.connect(to).await.unwrap().into_std().unwrap()
    });
    stream.set_nonblocking(false).unwrap();
    stream
}

/// A database URL for one test: a new PostgreSQL database when `RANKD_TEST_DATABASE_URL`
/// is set, else a SQLite file in `dir`.
pub fn fresh_database(dir: &Path) -> String {
    sqlx::any::install_default_drivers();
    match std::env::var("RANKD_TEST_DATABASE_URL") {
        Ok(server) if !server.is_empty() => {
            static N: AtomicUsize = AtomicUsize::new(0);
            let name = format!(
                "rankd_test_{}_{}_{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos()
            );
            runtime().block_on(async {
                let mut conn = sqlx::AnyConnection::connect(&server).await.unwrap();
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
            });
            let mut url = url::Url::parse(&server).unwrap();
            url.set_path(&name);
            url.to_string()
        }
        _ => format!("sqlite://{}?mode=rwc", dir.join("ops-test.db").display()),
    }
}

/// Runs one SQL statement against the server's database; returns rows affected.
pub fn sql(db: &str, statement: &str) -> u64 {
    runtime().block_on(async {
        let mut conn = sqlx::AnyConnection::connect(db).await.unwrap();
        sqlx::query(statement)
            .execute(&mut conn)
            .await
            .unwrap()
            .rows_affected()
    })
}

/// One column of a query's rows, as text (NULL as "NULL").
pub fn column(db: &str, query: &str) -> Vec<String> {
    runtime().block_on(async {
        let mut conn = sqlx::AnyConnection::connect(db).await.unwrap();
        sqlx::query(query)
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .iter()
            .map(|r| {
                r.try_get::<Option<String>, _>(0)
                    .map(|v| v.unwrap_or_else(|| "NULL".into()))
                    .or_else(|_| r.try_get::<i64, _>(0).map(|v| v.to_string()))
                    .unwrap()
            })
            .collect()
    })
}

/// Row count of every table, and every judgment and seed in full: compared before and after
/// a rejected request to show that it changed nothing.
pub fn snapshot(db: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for t in TABLES {
        out.insert(
            format!("count {t}"),
            column(db, &format!("SELECT COUNT(*) FROM {t}")),
        );
    }
    out.insert(
        "judgments".into(),
        column(
            db,
            "SELECT query_id || '|' || doc_id || '|' || CAST(grade AS TEXT) || '|' || source \
             FROM judgments ORDER BY query_id, doc_id",
        ),
    );
    out.insert(
        "queries".into(),
        column(
            db,
            "SELECT query_id || '|' || text FROM queries ORDER BY query_id",
        ),
    );
    out.insert(
        "seeds".into(),
        column(db, "SELECT doc_id FROM trustrank_seeds ORDER BY doc_id"),
    );
    out.insert(
        "reservations".into(),
        column(
            db,
            "SELECT query_id || '|' || doc_id || '|' || batch_id FROM label_reservations \
             ORDER BY query_id, doc_id",
        ),
    );
    out.insert(
        "jobs".into(),
        column(
            db,
            "SELECT CAST(id AS TEXT) || '|' || status || '|' || CAST(cancel_requested AS TEXT) \
             FROM jobs ORDER BY id",
        ),
    );
    out
}

/// The rankd binary under test: cargo's build of this checkout, or `RANKD_TEST_BIN` when set
/// (where checkouts share a target directory, its `debug/rankd` may be another checkout's).
pub fn rankd_bin() -> PathBuf {
    std::env::var_os("RANKD_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rankd")))
}

pub struct Server {
    pub child: Child,
    pub base: String,
    /// The data directory made for a server started without one (a root keeps its impression
    /// log there), removed with the server.
    pub scratch: Option<tempfile::TempDir>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Stops the server with SIGTERM and waits for it to exit.
    pub fn stop(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
    }
}

/// Starts `rankd serve` on a free port with `token` (None: admin disabled) and `db`.
pub fn start(data: &Path, db: &str, token: Option<&str>) -> Server {
    start_with_env(data, db, token, &[])
}

/// As [`start`], with extra environment variables.
pub fn start_with_env(data: &Path, db: &str, token: Option<&str>, env: &[(&str, &str)]) -> Server {
    start_serve(
        &["--data-dir", data.to_str().unwrap(), "--database-url", db],
        token,
        env,
    )
}

/// Starts `rankd serve --addr 127.0.0.1:0 ARGS` and waits for the address it announces.
pub fn start_serve(args: &[&str], token: Option<&str>, env: &[(&str, &str)]) -> Server {
    let mut cmd = rankd_command();
    cmd.arg("serve");
    if !args.contains(&"--addr") {
        cmd.args(["--addr", "127.0.0.1:0"]);
    }
    let scratch = (!args.contains(&"--data-dir")
        && !env.iter().any(|(k, _)| *k == "RANKD_DATA_DIR"))
    .then(|| tempfile::tempdir().unwrap());
    if let Some(dir) = &scratch {
        cmd.args(["--data-dir", dir.path().to_str().unwrap()]);
    }
    cmd.args(args)
        .env("RANKD_LOG", "error")
        .env_remove("RANKD_ADMIN_TOKEN")
        .env_remove("RANKD_CONFIG")
        .env_remove("DATABASE_URL")
        .env_remove("RANKD_DATABASE_URL")
        .stderr(Stdio::piped());
    if let Some(t) = token {
        cmd.env("RANKD_ADMIN_TOKEN", t);
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("the server prints its address or an error")
            .unwrap();
        let announced = [" on http://", " on https://"]
            .iter()
            .find_map(|on| Some((on, line.split(on).nth(1)?)));
        if let Some((on, rest)) = announced {
            let scheme = on.trim_start_matches(" on ").trim_end_matches("://");
            break format!("{scheme}://{}", rest.split('/').next().unwrap());
        }
        assert!(!line.starts_with("error"), "rankd serve failed: {line}");
    };
    std::thread::spawn(move || for _ in lines {});
    Server {
        child,
        base,
        scratch,
    }
}

/// `rankd serve --role leaf` of shard `shard` on the object store `store` at `addr`
/// (`127.0.0.1:0`: a free port) with the admin token [`TOKEN`], looking for new generations
/// every 50 ms; `role` adds `--primary`, `--elect-primary` and its flags, or nothing (a
/// replica following the store).
pub fn store_leaf(data: &Path, store: &str, shard: u32, role: &[&str], addr: &str) -> Server {
    let shard = shard.to_string();
    let mut args = vec![
        "--addr",
        addr,
        "--role",
        "leaf",
        "--data-dir",
        data.to_str().unwrap(),
        "--store",
        store,
        "--shard-id",
        &shard,
        "--poll-ms",
        "50",
    ];
    args.extend(role);
    start_serve(&args, Some(TOKEN), &[])
}

/// A leaf (`rankd serve --role leaf`) for each of the three shards of the sharded data
/// directory `sharded`.
pub fn start_leaves(sharded: &Path) -> Vec<Server> {
    (0..3)
        .map(|s| {
            let data = sharded.join(format!("shards/{s}"));
            start_serve(
                &["--role", "leaf", "--data-dir", data.to_str().unwrap()],
                None,
                &[],
            )
        })
        .collect()
}

/// The samples of the metric `name` at `base/metrics` whose labels include all of `labels`
/// (each `key="value"`), summed; `None` when there is no such sample.
pub fn metric(base: &str, name: &str, labels: &[&str]) -> Option<f64> {
    let text = get(&format!("{base}/metrics"), None).body;
    let samples: Vec<f64> = text
        .as_str()
        .unwrap()
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && labels.iter().all(|x| l.contains(x))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .collect();
    (!samples.is_empty()).then(|| samples.iter().sum())
}

/// `rankd train` on the index in `data` with the judged `queries` and `qrels` (TREC files),
/// `epochs` epochs and `more` flags, writing `out`; the model file's JSON.
pub fn train_model(
    data: &Path,
    queries: &Path,
    qrels: &Path,
    epochs: u32,
    more: &[&str],
    out: &Path,
) -> Value {
    let epochs = epochs.to_string();
    let mut args = vec![
        "train",
        "--queries",
        queries.to_str().unwrap(),
        "--qrels",
        qrels.to_str().unwrap(),
        "--epochs",
        &epochs,
        "--json",
        "--out",
        out.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ];
    args.extend(more);
    rankd_ok(args);
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// Uploads the model file `model` (id `id`) to the node at `base` and activates it.
pub fn activate_model(base: &str, token: &str, model: &Path, id: &str) {
    let bytes = std::fs::read(model).unwrap();
    let up = call(
        "POST",
        &format!("{base}/admin/models"),
        Some(token),
        Some(("application/octet-stream", &bytes)),
    );
    assert_eq!(up.status, 201, "{}", up.body);
    assert_eq!(up.body["model"], id);
    let a = post_json(
        &format!("{base}/admin/models/{id}/activate"),
        Some(token),
        "{}",
    );
    assert_eq!(a.status, 200, "{}", a.body);
}

/// The first `n` Cranfield queries' texts.
pub fn cranfield_queries(n: usize) -> Vec<String> {
    rankd::corpus::cranfield::read_queries(&cranfield_dir().join("cran.qry"))
        .unwrap()
        .into_iter()
        .take(n)
        .map(|q| q.text)
        .collect()
}

/// A BM25 search of `q` at `base`: the top 20 ids and scores only.
pub fn bm25_url(base: &str, q: &str) -> String {
    format!(
        "{base}/search?model=bm25&k=20&fields=&q={}",
        percent_encoding::utf8_percent_encode(q, percent_encoding::NON_ALPHANUMERIC)
    )
}

/// Runs `rankd ARGS`, asserting that it succeeds (its standard error in the message).
pub fn rankd_ok<I, S>(args: I) -> std::process::Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = rankd_command().args(args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// `rankd` under test, as a command to complete.
pub fn rankd_command() -> Command {
    let mut cmd = Command::new(rankd_bin());
    cmd.env("RANKD_CLUSTER_KEY", CLUSTER_KEY)
        .env_remove("RANKD_CLUSTER_KEY_FILE");
    cmd
}

/// The cluster key every `rankd` the tests start has in its environment (a leaf or root
/// needs one; a single node ignores it).
pub const CLUSTER_KEY: &str = "test-cluster-key-0123456789";

/// Runs `rankd ARGS` with logging at error level, as a user would see it fail or succeed.
pub fn rankd(args: &[&str]) -> Output {
    rankd_command()
        .args(args)
        .env("RANKD_LOG", "error")
        .output()
        .expect("rankd runs")
}

/// A finished command's standard error.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Kills a process with SIGKILL (no clean-up runs) and reaps it.
pub fn kill9(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `rel` in the shared data sets, `../shared/data/` beside the checkout (its README says what
/// each holds).
pub fn shared_data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(rel)
}

/// The Cranfield collection of `../shared/data/cranfield`.
pub fn cranfield_dir() -> PathBuf {
    shared_data("cranfield")
}

/// The tree models of `tests/fixtures/gbdt/` and their libraries' own scores.
pub fn gbdt_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gbdt")
}

/// Ingests `input` in `format` into `data` with the CLI, split over `shards` when given.
pub fn ingest_into(format: &str, input: &Path, data: &Path, shards: Option<u32>) {
    let shards = shards.map(|n| n.to_string());
    let mut args = vec![
        "ingest",
        "--format",
        format,
        "--input",
        input.to_str().unwrap(),
        "--json",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    if let Some(n) = &shards {
        args.extend(["--shards", n.as_str()]);
    }
    rankd_ok(args);
}

/// Copies a directory (a shard's data directory into a replica's).
pub fn copy_dir(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -r {} {}",
        from.display(),
        to.display()
    );
}

/// Writes `docs` (JSON lines) and ingests them with the CLI into `dir/data`.
pub fn ingest(dir: &Path, docs: &[&str]) -> PathBuf {
    let data = dir.join("data");
    let f = dir.join("docs.jsonl");
    std::fs::write(&f, docs.join("\n")).unwrap();
    rankd_ok([
        "ingest",
        "--format",
        "jsonl",
        "--input",
        f.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    data
}

pub const DOCS: &[&str] = &[
    r#"{"id":"vec","url":"https://x.org/vec","title":"Vec","body":"A contiguous growable array type, with capacity and length.","links":["https://x.org/iter"]}"#,
    r#"{"id":"iter","url":"https://x.org/iter","title":"Iterator","body":"An interface for dealing with iterators: map, filter, fold.","links":["https://x.org/vec"]}"#,
    r#"{"id":"map","url":"https://x.org/map","title":"HashMap","body":"A hash map with capacity, implemented with quadratic probing.","links":["https://x.org/vec","https://x.org/iter"]}"#,
];

/// An HTTP answer: status, `WWW-Authenticate` header, body as JSON (or a JSON string).
pub struct Answer {
    pub status: u16,
    pub www_authenticate: Option<String>,
    pub body: Value,
}

/// Sends one request. `token`: the bearer token to send, if any.
pub fn call(method: &str, url: &str, token: Option<&str>, body: Option<(&str, &[u8])>) -> Answer {
    try_call(method, url, token, body).unwrap()
}

/// As [`call`], with the transport error (no connection, connection closed) returned.
pub fn try_call(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<(&str, &[u8])>,
) -> Result<Answer, ureq::Error> {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut req = ureq::http::Request::builder().method(method).uri(url);
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    let result = match body {
        Some((content_type, bytes)) => {
            let r = req.header("Content-Type", content_type);
            agent.run(r.body(bytes.to_vec()).unwrap())
        }
        None => agent.run(req.body(()).unwrap()),
    };
    let mut resp = result?;
    let status = resp.status().as_u16();
    let www_authenticate = resp
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = resp.body_mut().read_to_string()?;
    Ok(Answer {
        status,
        www_authenticate,
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
    })
}

pub fn get(url: &str, token: Option<&str>) -> Answer {
    call("GET", url, token, None)
}

pub fn post_json(url: &str, token: Option<&str>, body: &str) -> Answer {
    call(
        "POST",
        url,
        token,
        Some(("application/json", body.as_bytes())),
    )
}

pub fn post_text(url: &str, token: Option<&str>, body: &str) -> Answer {
    call("POST", url, token, Some(("text/plain", body.as_bytes())))
}

/// Asserts that `a` is an error answer: `status`, the message containing `says`, and, when
/// given, the request `field` it names.
pub fn assert_error(a: &Answer, status: u16, field: Option<&str>, says: &str) {
    assert_eq!(a.status, status, "{}", a.body);
    if let Some(f) = field {
        assert_eq!(a.body["error"]["field"], f, "{}", a.body);
    }
    let message = a.body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(says), "expected {says:?} in {}", a.body);
}

/// Polls job `id` until it has finished; returns it.
pub fn wait_for_job(base: &str, id: i64) -> Value {
    wait_for_job_with(base, TOKEN, id)
}

/// [`wait_for_job`] with the admin token `token`.
pub fn wait_for_job_with(base: &str, token: &str, id: i64) -> Value {
    for _ in 0..600 {
        let a = get(&format!("{base}/admin/jobs/{id}"), Some(token));
        assert_eq!(a.status, 200, "{}", a.body);
        let status = a.body["status"].as_str().unwrap().to_string();
        if !["queued", "running"].contains(&status.as_str()) {
            return a.body;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("job {id} did not finish within 30 s");
}

/// Trains a model through `POST /admin/train` with `settings` and waits for the job, which
/// must succeed (with its progress at 1): the new model's id.
pub fn train_job(base: &str, settings: &str) -> String {
    let a = post_json(&format!("{base}/admin/train"), Some(TOKEN), settings);
    assert_eq!(a.status, 202, "{}", a.body);
    let job = wait_for_job(base, a.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["progress"], 1.0, "{job}");
    job["result"]["model"].as_str().unwrap().to_string()
}

/// Starts the graph job through `POST /admin/graph`: its id.
pub fn start_graph_job(base: &str) -> i64 {
    let a = call("POST", &format!("{base}/admin/graph"), Some(TOKEN), None);
    assert_eq!(a.status, 202, "{}", a.body);
    a.body["job"].as_i64().unwrap()
}

/// `GET base/search?PARAMS&q=Q` (`q` percent-encoded), which must answer 200: the answer.
pub fn search_body(base: &str, params: &str, q: &str) -> Value {
    let url = format!(
        "{base}/search?{params}&q={}",
        percent_encoding::utf8_percent_encode(q, percent_encoding::NON_ALPHANUMERIC)
    );
    let a = get(&url, None);
    assert_eq!(a.status, 200, "{url}: {}", a.body);
    a.body
}

/// A JSON array of numbers.
pub fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap_or_else(|| panic!("not a number: {x}")))
        .collect()
}

/// The hits of a search answer as (id, score), in the answer's order.
pub fn hit_scores(answer: &Value) -> Vec<(String, f64)> {
    answer["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits in {answer}"))
        .iter()
        .map(|h| {
            (
                h["id"].as_str().unwrap().to_string(),
                h["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// 24 documents about six topics: "topic word" queries find the documents that carry the topic
/// in their title, and every body says "basics". `padded` lengthens document i's body by i
/// filler words, so that documents differ in length.
pub fn topic_corpus(padded: bool) -> Vec<String> {
    let topics = ["vector", "iterator", "thread", "socket", "parser", "matrix"];
    (0..24)
        .map(|i| {
            let t = topics[i % 6];
            let other = topics[(i + 1) % 6];
            let body = format!("{t} {other} {t} basics and more about {other}");
            serde_json::json!({
                "id": format!("d{i}"),
                "url": format!("https://x.org/{t}/{i}"),
                "title": if i % 2 == 0 { format!("{t} guide") } else { format!("{other} notes") },
                "body": if padded { format!("{body} {}", "x ".repeat(i)) } else { body },
                "links": [format!("https://x.org/{other}/{}", (i + 1) % 24)],
            })
            .to_string()
        })
        .collect()
}

/// [`topic_corpus`] (`padded` as there) ingested into `dir/data`: the data directory.
pub fn ingest_topics(dir: &Path, padded: bool) -> PathBuf {
    let docs = topic_corpus(padded);
    ingest(dir, &docs.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A server over [`ingest_topics`] with a fresh database and the admin token [`TOKEN`]: its
/// data directory, database URL and process.
pub fn topic_server(dir: &Path, padded: bool) -> (PathBuf, String, Server) {
    let data = ingest_topics(dir, padded);
    let db = fresh_database(dir);
    let server = start(&data, &db, Some(TOKEN));
    (data, db, server)
}

/// Whether document `d{i}` of [`topic_corpus`] names topic `q` in its title.
pub fn topic_relevant(q: usize, i: usize) -> bool {
    (i.is_multiple_of(2) && i % 6 == q) || (i % 2 == 1 && (i + 1) % 6 == q)
}

/// Judgments over [`topic_corpus`]: for each topic, two queries (`q{topic}-0`, `q{topic}-1`)
/// judging every document, relevant when its title names the topic; a JSON array of
/// `POST /admin/judgments` objects.
pub fn topic_judgments() -> String {
    let topics = ["vector", "iterator", "thread", "socket", "parser", "matrix"];
    let mut rows = Vec::new();
    for (q, t) in topics.iter().enumerate() {
        for (n, second) in ["basics", "notes"].iter().enumerate() {
            for i in 0..24 {
                let relevant = topic_relevant(q, i);
                rows.push(serde_json::json!({
                    "query_id": format!("q{q}-{n}"), "query": format!("{t} {second}"),
                    "doc_id": format!("d{i}"), "grade": i32::from(relevant),
                }));
            }
        }
    }
    serde_json::Value::Array(rows).to_string()
}

/// Judgments over [`topic_corpus`] that make a bad model: 54 queries ("topic basics word": each
/// retrieves every document, "basics" being in every body), of which the queries the
/// activation guard holds out keep their true labels and the training queries get them
/// inverted, so training learns to rank the wrong pages first. `POST /admin/judgments`
/// objects, and how many queries the guard holds out.
pub fn guard_judgments() -> (Vec<Value>, usize) {
    let (train, held) = guard_queries();
    let mut rows = Vec::new();
    for q in train.iter().chain(&held) {
        for (doc, &grade) in &q.grades {
            rows.push(serde_json::json!({
                "query_id": q.qid, "query": q.text, "doc_id": doc, "grade": grade,
            }));
        }
    }
    (rows, held.len())
}

/// [`guard_judgments`] as judged queries: the training queries (labels inverted) and the
/// queries the guard holds out (true labels).
pub fn guard_queries() -> (
    Vec<rankd::training::JudgedQuery>,
    Vec<rankd::training::JudgedQuery>,
) {
    use rankd::training::{guard, JudgedQuery};
    let topics = ["vector", "iterator", "thread", "socket", "parser", "matrix"];
    let words = [
        "tips", "faq", "intro", "help", "info", "primer", "howto", "overview", "more",
    ];
    let mut queries = Vec::new();
    for (q, topic) in topics.iter().enumerate() {
        for word in words {
            queries.push(JudgedQuery {
                qid: format!("{topic}-{word}"),
                text: format!("{topic} basics {word}"),
                grades: (0..24)
                    .map(|i| (format!("d{i}"), i32::from(topic_relevant(q, i))))
                    .collect(),
            });
        }
    }
    let classes = guard::Classes::from([("judgments".into(), queries)]);
    let (mut train, held) = guard::hold_out(classes);
    let held = held["judgments"].clone();
    assert!(held.len() >= guard::MIN_QUERIES);
    for q in &mut train {
        for grade in q.grades.values_mut() {
            *grade = 1 - *grade;
        }
    }
    (train, held)
}

/// Id → title of every live document, read from the index with the library (not the server).
pub fn documents(data: &Path) -> BTreeMap<String, String> {
    let index = rankd::text::TextIndex::open(data, None).unwrap();
    let searcher = index.reader.searcher();
    let mut out = BTreeMap::new();
    for reader in searcher.segment_readers() {
        let store = reader.get_store_reader(8).unwrap();
        for doc in reader.doc_ids_alive() {
            let d = index.stored(&store.get(doc).unwrap());
            assert!(
                out.insert(d.id.clone(), d.title).is_none(),
                "document {} is in the index twice",
                d.id
            );
        }
    }
    let manifest = index.manifest().unwrap();
    assert_eq!(
        manifest.num_docs,
        out.len() as u64,
        "manifest.json counts {} documents, the index holds {}",
        manifest.num_docs,
        out.len()
    );
    out
}

/// Files an interrupted or failed write may leave and must not: temporary files anywhere in the
/// data directory, and files of `index/` that belong to no committed segment.
pub fn leftovers(data: &Path) -> Vec<String> {
    let mut found = Vec::new();
    walk(data, &mut |path| {
        let name = path.file_name().unwrap().to_string_lossy();
        if name.starts_with(".tmp") || name.contains(".rankd-tmp") {
            found.push(path.display().to_string());
        }
    });
    let index = data.join("index");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(index.join("meta.json")).unwrap()).unwrap();
    let committed: Vec<String> = meta["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["segment_id"].as_str().unwrap().replace('-', ""))
        .collect();
    for entry in std::fs::read_dir(&index).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let tantivy_own = [
            "meta.json",
            ".managed.json",
            ".tantivy-meta.lock",
            ".tantivy-writer.lock",
        ];
        let segment = name.split('.').next().unwrap();
        if !tantivy_own.contains(&name.as_str()) && !committed.iter().any(|c| c == segment) {
            found.push(index.join(&name).display().to_string());
        }
    }
    found
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, f);
        } else {
            f(&path);
        }
    }
}

/// The first phase's top `k` for `q` under `model`, on the whole document: the candidates a
/// second phase would rerank, straight from the library's scorer (no engine, no reranker).
pub fn first_phase(
    index: &rankd::text::TextIndex,
    searcher: &tantivy::Searcher,
    model: rankd::text::ModelKind,
    q: &str,
    k: usize,
) -> Vec<rankd::features::Candidate> {
    let stats = rankd::text::stats::Stats::new(searcher);
    let q = rankd::text::query::AnalyzedQuery::new(q);
    let bound = index.bind(&stats, model, None, &q).unwrap().unwrap();
    let columns = index.doc_columns(searcher).unwrap();
    bound.top(searcher, &columns, &stats, k, 0).unwrap()
}

/// Knuth's MMIX linear congruential generator: reproducible pseudo-random test data, the same
/// stream on every platform and with no dependency.
pub struct Lcg(pub u64);

impl Lcg {
    /// The next 31 bits.
    pub fn next_u31(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// Uniform in [0, 1), on 31 bits.
    pub fn unit(&mut self) -> f64 {
        self.next_u31() as f64 / (1u64 << 31) as f64
    }

    /// In `0..n` (modulo `n`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u31() % n as u64) as usize
    }
}

/// The words of [`word_corpus`].
pub const CORPUS_WORDS: &[&str] = &[
    "rust", "vector", "iterator", "borrow", "trait", "closure", "thread", "channel", "mutex",
    "socket", "parser", "graph", "rank", "score", "index", "query",
];

/// 60 linked documents `d0..d59` for in-process indexes, their titles and bodies drawn from
/// [`CORPUS_WORDS`]; [`title_word_judgments`] judges them.
pub fn word_corpus() -> Vec<rankd::corpus::Document> {
    let words = CORPUS_WORDS;
    (0..60)
        .map(|i| {
            let w = |k: usize| words[(i * 7 + k * 3) % words.len()];
            rankd::corpus::Document {
                id: format!("d{i}"),
                url: Some(format!("https://example.org/{}/{}/{i}", w(0), w(1))),
                title: format!("{} {}", w(0), w(2)),
                body: (0..(10 + i % 13)).map(w).collect::<Vec<_>>().join(" "),
                links: vec![format!("d{}", (i + 1) % 60), format!("d{}", (i * 5) % 60)],
                ..Default::default()
            }
        })
        .collect()
}

/// Twelve queries "w1 w2" over `docs` (see [`word_corpus`]), every document judged: relevant
/// (grade 1) when its title holds w1.
pub fn title_word_judgments(docs: &[rankd::corpus::Document]) -> Vec<rankd::training::JudgedQuery> {
    let words = CORPUS_WORDS;
    (0..12)
        .map(|i| {
            let (a, b) = (words[i % words.len()], words[(i + 5) % words.len()]);
            let grades = docs
                .iter()
                .map(|d| (d.id.clone(), i32::from(d.title.split(' ').any(|t| t == a))))
                .collect();
            rankd::training::JudgedQuery {
                qid: format!("q{i}"),
                text: format!("{a} {b}"),
                grades,
            }
        })
        .collect()
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    pub fn mount(size: &str) -> Result<Tmpfs, String> {
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A gossip address on loopback.
pub fn gossip(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// A leaf of shard `shard` of `collection` serving `data`, gossiping on `port`, joining
/// through `seeds`, registering in `metastore` if given.
pub fn gossip_leaf(
    data: &Path,
    collection: &str,
    shard: u32,
    port: u16,
    seeds: &str,
    metastore: Option<&str>,
) -> Server {
    let (shard, gossip) = (shard.to_string(), gossip(port));
    let mut args = vec![
        "--role",
        "leaf",
        "--data-dir",
        data.to_str().unwrap(),
        "--collection",
        collection,
        "--shard-id",
        &shard,
        "--gossip",
        &gossip,
        "--seed",
        seeds,
    ];
    if let Some(m) = metastore {
        args.extend(["--metastore", m]);
    }
    start_serve(&args, None, &[])
}
