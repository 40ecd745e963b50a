//! The `rankd` binary: logging set-up, then the command line (`rankd::cli`).
//!
//! The process-level choices live here:
//! - Log lines carry ANSI colours only when stderr is a terminal, so logs redirected to a file
//!   or collected by systemd/docker stay plain text.
//! - Commands that print results (`eval --json | head`, ...) restore the default `SIGPIPE`
//!   action: when the reader of stdout goes away, they end quietly as every Unix filter does,
//!   instead of `println!` panicking on `EPIPE` (exit 101). The serving commands keep Rust's
//!   default (`SIGPIPE` ignored), so a client closing its connection is an error on that one
//!   socket, never the end of the server.
//! - Memory comes from mimalloc, not the system's malloc. With glibc's malloc the server had
//!   to choose between throughput and memory: its default (eight arenas per core, and rankd
//!   runs many threads: tokio's workers, the search threads, rayon, tantivy's indexing and
//!   merging threads) let the soak's anonymous memory grow from 85 to 159 MB in ten minutes,
//!   held in idle arenas; capping the arenas at one per core kept it flat but cost about 15 %
//!   of peak search throughput, and more once searches moved to threads of their own.
//!   mimalloc's per-thread heaps keep both (docs/RELIABILITY.md "Soak", docs/BENCHMARKS.md
//!   "The request budget against the search throughput").
//! - What still allocates with glibc's malloc (SQLite, C code under the crates) gets one
//!   arena per core, unless `MALLOC_ARENA_MAX` says otherwise.

use std::io::IsTerminal;

use clap::Parser;
use rankd::cli::Command;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    cap_malloc_arenas();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RANKD_LOG")
                .unwrap_or_else(|_| "warn,rankd=info".into()),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let cli = rankd::cli::Cli::parse();
    if !matches!(cli.command, Command::Serve(_) | Command::Demo(_)) {
        restore_default_sigpipe();
    }
    std::process::exit(rankd::cli::run(cli));
}

#[cfg(unix)]
fn restore_default_sigpipe() {
    // SAFETY: called once, before any thread is started, with a valid signal and handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn restore_default_sigpipe() {}

/// One glibc malloc arena per core for what still uses it (see the module doc), unless `MALLOC_ARENA_MAX` says
/// otherwise. Runs first, before any thread exists.
fn cap_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let arenas = libc::c_int::try_from(cores.max(2)).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only changes a malloc setting; no thread has started yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}
