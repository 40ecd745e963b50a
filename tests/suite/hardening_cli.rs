//! Issue 16, the command line: a closed stdout ends a command quietly (no EPIPE panic), logs
//! carry no colour codes when stderr is not a terminal, and a write that fills the disk
//! leaves no uncommitted segment files behind, names the index path, keeps earlier commits,
//! and does not stop later ingests or the server; on a disk filled by something else, writes
//! fail cleanly, the server serves, and once space is freed writes succeed again (on a small
//! tmpfs; skipped when it cannot be mounted).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::*;

/// `rankd` as a user runs it: logging as configured by default (no `RANKD_LOG`), no data
/// directory from the environment.
fn user_rankd() -> Command {
    let mut c = rankd_command();
    c.env_remove("RANKD_LOG").env_remove("RANKD_DATA_DIR");
    c
}

fn write_docs(dir: &Path) -> PathBuf {
    let f = dir.join("docs.jsonl");
    std::fs::write(&f, DOCS.join("\n")).unwrap();
    f
}

/// Item 15: `rankd ... --json | head -c 10` used to panic on the broken pipe (exit 101).
#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let docs = write_docs(dir.path());
    let mut child = user_rankd()
        .args(["ingest", "--format", "jsonl", "--json", "--input"])
        .arg(&docs)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the command prints its summary.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert!(
        out.status.success() || out.status.signal() == Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        out.status
    );
}

/// Item 16: log lines are plain text when stderr is not a terminal.
#[test]
fn logs_have_no_colour_codes_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let docs = write_docs(dir.path());
    let out = user_rankd()
        .env("RANKD_LOG", "debug")
        .args(["ingest", "--format", "jsonl", "--input"])
        .arg(&docs)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DEBUG"), "no log lines to check: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "ANSI escape codes in: {stderr}");
}

fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            bytes_under(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Documents of hard-to-compress text, about `mb` MB in all, as JSON lines.
fn bulky_docs(prefix: &str, mb: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut word = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        format!("w{:x}", state & 0xff_ffff)
    };
    let mut out = String::new();
    let docs = mb * 20;
    for i in 0..docs {
        let body: Vec<String> = (0..6000).map(|_| word()).collect();
        out.push_str(
            &serde_json::json!({"id": format!("{prefix}{i}"), "body": body.join(" ")}).to_string(),
        );
        out.push('\n');
    }
    out
}

/// Item 6: a write that fills the disk fails naming the index directory, removes the segment
/// files it wrote, keeps the earlier commits, and later writes (CLI and server) still succeed;
/// the server keeps serving. Then a disk filled by another file: writes fail naming the data
/// directory and change nothing, the server does not start and says which database it could
/// not open, and once the file is removed the same write succeeds and the server serves it.
#[test]
fn a_full_disk_leaves_no_uncommitted_files_and_writes_recover() {
    let fs = match Tmpfs::mount("20m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("skipped: needs a 20 MB tmpfs ({why})");
            return;
        }
    };
    let work = tempfile::tempdir().unwrap();
    let data = fs.path().join("data");
    let small = write_docs(work.path());
    let ingest = |input: &Path| {
        user_rankd()
            .args(["ingest", "--format", "jsonl", "--input"])
            .arg(input)
            .arg("--data-dir")
            .arg(&data)
            .output()
            .unwrap()
    };
    assert!(ingest(&small).status.success());
    let committed = documents(&data);
    let before = bytes_under(fs.path());

    let big = work.path().join("big.jsonl");
    std::fs::write(&big, bulky_docs("big", 40)).unwrap();
    let out = ingest(&big);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let after = bytes_under(fs.path());
    assert!(
        after < before + (1 << 20),
        "the failed ingest left {} bytes behind (before {before}, after {after})",
        after - before
    );
    let index_dir = data.join("index");
    assert!(
        stderr.contains(&index_dir.display().to_string()),
        "the error names the index directory: {stderr}"
    );
    assert_eq!(documents(&data), committed, "earlier commits intact");
    assert_eq!(leftovers(&data), Vec::<String>::new());
    // The next ingest works, and the index is as before plus it.
    let out = ingest(&small);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The server: a batch that fills the disk (45 MB of barely compressible text on 20 MB,
    // so that it fails whether or not a merge runs during it) is a 500 naming the path, and the server goes
    // on serving and accepting batches.
    let db = format!("sqlite://{}?mode=rwc", data.join("rankd.db").display());
    let server = start_with_env(
        &data,
        &db,
        Some(TOKEN),
        &[("RANKD_MAX_BODY_BYTES", "100000000")],
    );
    let b = &server.base;
    let a = call(
        "POST",
        &format!("{b}/admin/documents"),
        Some(TOKEN),
        Some(("application/x-ndjson", bulky_docs("web", 45).as_bytes())),
    );
    assert_eq!(a.status, 500, "{}", a.body);
    let message = a.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&index_dir.display().to_string()),
        "{}",
        a.body
    );
    let a = post_text(
        &format!("{b}/admin/documents"),
        Some(TOKEN),
        r#"{"id":"after","title":"after the full disk","body":"still indexing"}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let a = get(&format!("{b}/search?q=indexing"), None);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["hits"][0]["id"], "after");
    server.stop();
    let committed = documents(&data);

    // A disk filled by something else: every write fails, naming the data directory, and
    // changes nothing; the server either refuses to start, naming its data directory (SQLite
    // cannot create its shared-memory file), or (when SQLite reuses one left behind) starts
    // and answers a write with a 500 naming the index directory.
    let filler = fs.path().join("filler");
    fill(&filler);
    let one = work.path().join("one.jsonl");
    std::fs::write(
        &one,
        r#"{"id":"late","title":"written once space is free"}"#,
    )
    .unwrap();
    let out = ingest(&one);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&data.display().to_string()),
        "the error names the data directory: {stderr}"
    );
    assert_eq!(documents(&data), committed, "earlier commits intact");
    assert_eq!(leftovers(&data), Vec::<String>::new());
    let log = work.path().join("serve.err");
    let mut child = user_rankd()
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .args(["--database-url", &db])
        .env("RANKD_ADMIN_TOKEN", TOKEN)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let (exited, address) = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break (Some(status), None);
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text.split("http://").nth(1) {
            break (
                None,
                Some(format!("http://{}", rest.split('/').next().unwrap())),
            );
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "serve neither exited nor listened: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    match (exited, address) {
        (Some(status), _) => {
            assert_eq!(status.code(), Some(1), "{stderr}");
            assert!(stderr.contains(&data.display().to_string()), "{stderr}");
        }
        (None, Some(b)) => {
            let a = post_text(
                &format!("{b}/admin/documents"),
                Some(TOKEN),
                r#"{"id":"lost","title":"no room"}"#,
            );
            assert_eq!(a.status, 500, "{}", a.body);
            assert!(
                a.body.to_string().contains(&data.display().to_string()),
                "{}",
                a.body
            );
            let _ = child.kill();
            let _ = child.wait();
            assert_eq!(documents(&data), committed, "earlier commits intact");
        }
        (None, None) => unreachable!("the loop ends with an exit or an address"),
    }

    // Space freed: the same ingest succeeds and the server serves its document.
    std::fs::remove_file(&filler).unwrap();
    let out = ingest(&one);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut expected = committed;
    expected.insert("late".into(), "written once space is free".into());
    assert_eq!(documents(&data), expected);
    let server = start(&data, &db, Some(TOKEN));
    let a = get(&format!("{}/search?q=space", server.base), None);
    assert_eq!(a.body["hits"][0]["id"], "late", "{}", a.body);
    server.stop();
}

/// Writes zeros to `path` until the file system is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let block = vec![0u8; 1 << 16];
    loop {
        if let Err(e) = f.write_all(&block) {
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
            break;
        }
    }
    // What a partial block could not take.
    while f.write_all(&[0]).is_ok() {}
}

/// Item 7: HTML pages ingested without `--base-url` keep their links to one another (stored
/// as page ids), so the link graph has their edges.
#[test]
fn html_without_a_base_url_keeps_its_link_graph() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("b")).unwrap();
    std::fs::write(
        site.join("index.html"),
        r#"<title>Home</title><p>home page</p><a href="b/page.html">B</a>"#,
    )
    .unwrap();
    std::fs::write(
        site.join("b/page.html"),
        r#"<title>B</title><p>the b page</p><a href="../index.html">home</a>"#,
    )
    .unwrap();
    let data = dir.path().join("data");
    let (site, data) = (site.to_str().unwrap(), data.to_str().unwrap());
    rankd_ok([
        "ingest",
        "--format",
        "html",
        "--input",
        site,
        "--data-dir",
        data,
    ]);
    let out = rankd_ok(["graph", "--json", "--data-dir", data]);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["edges"], 2, "{summary}");
}
