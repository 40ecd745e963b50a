//! The `rankd` binary: logging set-up, then the command line (`rankd::cli`).
//!
//! Two process-level choices live here:
//! - Log lines carry ANSI colours only when stderr is a terminal, so logs redirected to a file
//!   or collected by systemd/docker stay plain text.
//! - Commands that print results (`eval --json | head`, ...) restore the default `SIGPIPE`
//!   action: when the reader of stdout goes away, they end quietly as every Unix filter does,
//!   instead of `println!` panicking on `EPIPE` (exit 101). The serving commands keep Rust's
//!   default (`SIGPIPE` ignored), so a client closing its connection is an error on that one
//!   socket, never the end of the server.

use std::io::IsTerminal;

use clap::Parser;
use rankd::cli::Command;

fn main() {
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
