//! Issue 30, a budget per request and fair connections (D3, D4; findings N5, N6), against a
//! real `rankd serve` over a corpus where one search can take seconds: a 1 024-word query
//! fused over two models, every document holding many of its words.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::util::*;

/// Distinct words of the corpus, all of them in the heavy query.
const VOCABULARY: usize = 1024;

/// `n` documents of 120 words each, drawn from [`VOCABULARY`] words (`t0` … `t1023`).
fn heavy_corpus(dir: &Path, n: usize) -> PathBuf {
    let mut seed: u64 = 16;
    let mut word = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        format!("t{}", (seed >> 33) % VOCABULARY as u64)
    };
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let body: Vec<String> = (0..120).map(|_| word()).collect();
            serde_json::json!({
                "id": format!("d{i}"),
                "url": format!("https://h{}.example/{i}", i % 50),
                "title": format!("{} {}", word(), word()),
                "body": body.join(" "),
            })
            .to_string()
        })
        .collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    ingest(dir, &lines)
}

/// The path and query of a search that walks every posting list of the corpus twice.
fn heavy_search() -> String {
    let q: Vec<String> = (0..VOCABULARY).map(|i| format!("t{i}")).collect();
    format!(
        "/search?q={}&model=fusion&inputs=bm25,tfidf&fusion=condorcet&fusion_depth=1000",
        q.join("+")
    )
}

fn heavy_server(env: &[(&str, &str)]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let data = heavy_corpus(dir.path(), 30_000);
    let db = fresh_database(dir.path());
    let server = start_with_env(&data, &db, None, env);
    (dir, server)
}

/// Sends `GET path` on `s` and reads the status line's code (the answer's start).
fn status_on(s: &mut TcpStream, path: &str) -> u16 {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

/// `n` clients at `source` each sending heavy searches one after another, so that `n` are
/// in flight until [`HeavyLoad::stop`].
struct HeavyLoad {
    stop: Arc<AtomicBool>,
    clients: Vec<std::thread::JoinHandle<Vec<u16>>>,
}

impl HeavyLoad {
    fn start(base: &str, source: &'static str, n: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = (0..n)
            .map(|_| {
                let (base, stop) = (base.to_string(), stop.clone());
                std::thread::spawn(move || {
                    let mut statuses = Vec::new();
                    while !stop.load(Ordering::SeqCst) {
                        let mut s = connect_from(source, &base);
                        statuses.push(status_on(&mut s, &heavy_search()));
                    }
                    statuses
                })
            })
            .collect();
        // Let them reach the search threads.
        std::thread::sleep(Duration::from_millis(500));
        HeavyLoad { stop, clients }
    }

    /// Waits for the searches in flight; each answered 200, or 408/503 at its deadline.
    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for client in self.clients {
            for status in client.join().unwrap() {
                assert!(matches!(status, 200 | 408 | 503), "{status}");
            }
        }
    }
}

/// Asserts that at least `percent` % of `samples` (`None`: not a 200) took under `bound`.
/// The acceptance of issue 30 names a share, not every request: one sample on a shared
/// machine may lose its core for longer than the bound to another process.
fn assert_share_within(what: &str, samples: &[Option<Duration>], bound: Duration, percent: usize) {
    let mut took: Vec<Duration> = samples.iter().map(|s| s.unwrap_or(Duration::MAX)).collect();
    took.sort();
    let within = took.iter().filter(|t| **t < bound).count();
    let at = |p: usize| took[(took.len() * p / 100).min(took.len() - 1)];
    let summary = format!(
        "{what}: {within} of {} within {bound:?} (p50 {:?}, p90 {:?}, p99 {:?}, max {:?}; \
         MAX: not a 200)",
        took.len(),
        at(50),
        at(90),
        at(99),
        took[took.len() - 1]
    );
    eprintln!("{summary}");
    assert!(within * 100 >= took.len() * percent, "{summary}");
}

/// `GET url`'s time when it answered 200, else `None` (the status is shown).
fn timed_get(url: &str) -> Option<Duration> {
    let started = Instant::now();
    let a = get(url, None);
    if a.status != 200 {
        eprintln!(
            "{url}: {} after {:?}: {}",
            a.status,
            started.elapsed(),
            a.body
        );
        return None;
    }
    Some(started.elapsed())
}

/// CPU seconds the process has used (user and system), from `/proc/PID/stat`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// N6: a search over `request_timeout_secs` ends with a 408/503 within 10 % of it, and the
/// server stops working on it (before, it answered 200 after 26 s with a 2 s timeout);
/// a search whose cost cannot fit is a 400 naming the limit; the probes answer at once while
/// heavy searches run (before, four froze `/livez` for 16.6 s).
#[test]
fn searches_end_within_their_budget_and_probes_answer_meanwhile() {
    let (_dir, server) = heavy_server(&[("RANKD_REQUEST_TIMEOUT_SECS", "2")]);
    let b = &server.base;
    let started = Instant::now();
    let a = get(&format!("{b}{}", heavy_search()), None);
    let took = started.elapsed();
    assert!(
        matches!(a.status, 408 | 503),
        "{} after {took:?}: {}",
        a.status,
        a.body
    );
    assert!(
        took >= Duration::from_secs(2) && took <= Duration::from_millis(2200),
        "answered after {took:?}"
    );
    // The search thread stops at its next step: within a few seconds the server is idle.
    let pid = server.child.id();
    let quiet = (0..20).position(|_| {
        let before = cpu_seconds(pid);
        std::thread::sleep(Duration::from_millis(500));
        cpu_seconds(pid) - before < 0.1
    });
    let quiet = quiet.expect("the server kept working 10 s after the timeout");
    eprintln!(
        "answered {} after {took:?}; the server was idle within {} ms more",
        a.status,
        (quiet + 1) * 500
    );

    // Over the cost limit: three models × 1 024 words.
    let over = heavy_search().replace("inputs=bm25,tfidf", "inputs=bm25,tfidf,lm");
    assert_error(
        &get(&format!("{b}{over}"), None),
        400,
        Some("inputs"),
        "2048",
    );

    // Four heavy searches in flight throughout; the probes answer within 100 ms.
    let heavy = HeavyLoad::start(b, "127.0.0.1", 4);
    let mut probes: [(&str, Vec<Option<Duration>>); 3] = [
        ("/livez", vec![]),
        ("/readyz", vec![]),
        ("/metrics", vec![]),
    ];
    for _ in 0..100 {
        for (probe, took) in &mut probes {
            took.push(timed_get(&format!("{b}{probe}")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    heavy.stop();
    for (probe, took) in &probes {
        assert_share_within(probe, took, Duration::from_millis(100), 99);
    }
}

/// N5: one client (127.0.0.2) holding every connection the server allows, idle or with a
/// half-sent head, plus four heavy searches in flight, does not lock out another: its plain
/// searches answer 200 within 1 s at least 99 % of the time and `/livez` within 100 ms
/// (before, 33 of 34 requests were 503s).
#[test]
fn one_client_holding_every_connection_does_not_lock_out_another() {
    let (_dir, server) = heavy_server(&[
        ("RANKD_MAX_CONNECTIONS", "512"),
        ("RANKD_HEADER_READ_TIMEOUT_SECS", "60"),
        // Heavy searches end at 5 s (their clients send the next at once): the test ends soon.
        ("RANKD_REQUEST_TIMEOUT_SECS", "5"),
    ]);
    let b = server.base.clone();
    let hog = "127.0.0.2";
    let heavy = HeavyLoad::start(&b, hog, 4);
    let mut held = Vec::new();
    for i in 0..512 {
        let mut s = connect_from(hog, &b);
        if i % 2 == 1 {
            s.write_all(b"GET /sea").unwrap();
        }
        held.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));

    let (mut searches, mut livez) = (Vec::new(), Vec::new());
    for _ in 0..100 {
        searches.push(timed_get(&format!("{b}/search?q=t7+t9")));
        livez.push(timed_get(&format!("{b}/livez")));
    }
    drop(held);
    heavy.stop();
    assert_share_within("plain searches", &searches, Duration::from_secs(1), 99);
    assert_share_within("/livez", &livez, Duration::from_millis(100), 99);
}
