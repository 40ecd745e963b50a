//! The operational database: judgments, query texts, models and their activations, jobs and
//! their logs, TrustRank seeds, label reservations, search impressions and user events,
//! interleaving experiments. SQLite (a file in the data directory, nothing to install) by
//! default, PostgreSQL when a `postgres://` URL is configured.
//!
//! Queries are written once, in the SQL both backends understand, and run through sqlx's
//! `Any` driver with runtime-checked queries (no database is needed to build rankd). Only the
//! schema differs (identity columns), so each backend has its own migration directory:
//! `migrations/sqlite/` and `migrations/postgres/`, applied at start-up.

pub mod events;
pub mod experiments;
pub mod jobs;
pub mod judgments;
pub mod labels;
pub mod models;
pub mod seeds;

use std::path::Path;
use std::str::FromStr;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor};

pub use jobs::{CancelOutcome, Job, JobKind, JobStatus, NewJob};
pub use judgments::{Judgment, JudgmentFilter};

/// Which database engine a URL selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of_url(url: &str) -> anyhow::Result<Backend> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            anyhow::bail!(
                "unsupported database URL {:?}: expected sqlite:PATH or postgres://..",
                redact(url)
            )
        }
    }
}

/// A connection pool with the schema migrated.
#[derive(Clone)]
pub struct Db {
    pub pool: AnyPool,
    pub backend: Backend,
}

/// The default database: `rankd.db` in the data directory.
pub fn default_url(data_dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", data_dir.join("rankd.db").display())
}

impl Db {
    /// Begins a transaction that will write. On SQLite it is `BEGIN IMMEDIATE`, which takes
    /// the write lock at once (waiting up to `busy_timeout` for it): a deferred transaction
    /// that reads and then writes fails at once with "database is locked" when another
    /// connection committed in between, and model activations beside other admin writes
    /// answered 500 that way (`hardening_server::concurrent_admin_writes_wait_for_each_other`).
    pub async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.pool.begin().await,
        }
    }

    /// Connects to `url`, applies the migrations of its backend, and marks jobs left queued or
    /// running by a previous process as failed: no thread of this process runs them.
    pub async fn open(url: &str) -> anyhow::Result<Db> {
        sqlx::any::install_default_drivers();
        let backend = Backend::of_url(url)?;
        let options = AnyConnectOptions::from_str(url)
            .with_context(|| format!("invalid database URL {:?}", redact(url)))?;
        let pool = pool_options(backend, 8)
            .connect_with(options)
            .await
            .with_context(|| format!("cannot connect to the database {:?}", redact(url)))?;
        // Every error names the database: on a full disk, SQLite's own message ("disk I/O
        // error") does not say where.
        let failed = |what: &str| format!("{what} {:?}", redact(url));
        if backend == Backend::Sqlite {
            pool.execute("PRAGMA journal_mode = WAL")
                .await
                .with_context(|| failed("cannot switch to write-ahead logging in"))?;
        }
        migrator(backend)
            .run(&pool)
            .await
            .with_context(|| failed("cannot apply the migrations to"))?;
        let db = Db { pool, backend };
        let interrupted = db
            .fail_interrupted_jobs()
            .await
            .with_context(|| failed("cannot mark interrupted jobs in"))?;
        if interrupted > 0 {
            tracing::warn!("{interrupted} job(s) interrupted by the last restart marked failed");
        }
        Ok(db)
    }
}

/// A pool of at most `max` connections to a `backend` database, each set up as rankd's
/// schema expects (SQLite: a busy timeout, foreign keys on).
pub(crate) fn pool_options(backend: Backend, max: u32) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(max)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if backend == Backend::Sqlite {
                    // Readers never wait for a writer; writers wait for each other.
                    sqlx::query("PRAGMA busy_timeout = 5000")
                        .execute(&mut *conn)
                        .await?;
                    sqlx::query("PRAGMA foreign_keys = ON")
                        .execute(&mut *conn)
                        .await?;
                }
                Ok(())
            })
        })
}

/// The schema's migrations for `backend` (the ops tables and the cluster metastore's).
pub(crate) fn migrator(backend: Backend) -> sqlx::migrate::Migrator {
    match backend {
        Backend::Sqlite => sqlx::migrate!("migrations/sqlite"),
        Backend::Postgres => sqlx::migrate!("migrations/postgres"),
    }
}

/// Milliseconds since the Unix epoch: the unit of every time column.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A time column as RFC 3339 text (UTC, milliseconds), for JSON answers.
pub(crate) fn rfc3339(ms: i64) -> String {
    use tantivy::time::format_description::well_known::Rfc3339;
    tantivy::time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

/// The URL without its password, for messages and logs.
pub(crate) fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_by_scheme_and_passwords_hidden() {
        assert_eq!(Backend::of_url("sqlite://x.db").unwrap(), Backend::Sqlite);
        assert_eq!(
            Backend::of_url("postgresql://u@h/db").unwrap(),
            Backend::Postgres
        );
        let err = Backend::of_url("mysql://u:secret@h/db").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
        assert_eq!(rfc3339(1_704_164_645_000), "2024-01-02T03:04:05Z");
    }
}
