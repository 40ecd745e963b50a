//! Server configuration from a TOML file, `RANKD_*` environment variables and command-line
//! flags, in that order of precedence (flags override the environment, which overrides the
//! file, which overrides the defaults), as Meilisearch does.
//!
//! ```toml
//! addr = "127.0.0.1:8080"
//! data_dir = "/var/lib/rankd"
//! database_url = "postgres://rankd@127.0.0.1/rankd"   # default: sqlite in data_dir
//! admin_token = "a long random string"                # default: admin API disabled
//! cluster_key_file = "/etc/rankd/cluster.key"         # or cluster_key = ".."; leaves and roots
//! [limits]
//! max_body_bytes = 16777216
//! max_concurrent_requests = 256      # over it: 503 at once (load shedding)
//! request_timeout_secs = 30
//! max_connections = 512               # open connections; over it: 503 and close
//! header_read_timeout_secs = 10       # a request's headers must arrive within this
//! admin_auth_failures_per_minute = 60 # wrong admin tokens per address, then 429
//! [events]                            # impressions and POST /events (crate::events)
//! log_impressions = true             # false: /search answers carry no query_id, nothing logged
//! retention_days = 90                 # older impressions and events: deleted at start-up, hourly
//! queue_capacity = 65536              # impressions waiting to be written; beyond: dropped
//! max_per_second = 20000              # events per second per client address, then 429
//! max_body_bytes = 1048576            # largest POST /events body
//! max_per_request = 1000              # most events in one POST /events
//! swap_share = 0.0                    # share of first pages with rank 1 swapped (RandPair)
//! max_training_pages = 200000         # newest first pages click training reads
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use crate::secret::ClusterKey;

/// Everything `rankd serve` needs to know beyond the index itself.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    /// `None`: SQLite in `data_dir/rankd.db`.
    pub database_url: Option<String>,
    /// `None`: the admin API answers 503 (disabled).
    pub admin_token: Option<String>,
    /// The secret of calls between a collection's nodes (`crate::secret::ClusterKey`): from
    /// `--cluster-key-file`, `RANKD_CLUSTER_KEY_FILE`, `RANKD_CLUSTER_KEY`, or the file's
    /// `cluster_key_file` or `cluster_key`, in that order. Never a flag's value: a flag shows
    /// in `ps`.
    pub cluster_key: Option<ClusterKey>,
    /// The server's TLS certificate chain and key (PEM files, `--tls-cert`/`--tls-key` or
    /// `RANKD_TLS_CERT`/`RANKD_TLS_KEY`): HTTPS instead of HTTP (`crate::tls`).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The CA certificates (PEM) a root trusts for its leaves' `https://` URLs (`--tls-ca`
    /// or `RANKD_TLS_CA`); `None`: the system's.
    pub tls_ca: Option<PathBuf>,
    pub limits: Limits,
    pub events: crate::events::EventSettings,
}

/// Resource limits of the HTTP server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body accepted (document batches, qrels imports).
    pub max_body_bytes: usize,
    /// Requests served at once, over every route together; one more is answered 503 at
    /// once (load shedding) rather than queued.
    pub max_concurrent_requests: usize,
    /// A request running longer than this is answered with 408.
    pub request_timeout_secs: u64,
    /// Open client connections; a connection over the cap is answered 503 and closed.
    pub max_connections: usize,
    /// A connection whose request line and headers have not fully arrived this long after
    /// it opened (or after its previous answer) is closed: slow or idle clients cannot hold
    /// connections open (slowloris).
    pub header_read_timeout_secs: u64,
    /// Wrong admin tokens accepted from one address within a minute; after that the address
    /// gets 429 on every admin route until the minute is over.
    pub admin_auth_failures_per_minute: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 16 << 20,
            max_concurrent_requests: 256,
            request_timeout_secs: 30,
            max_connections: 512,
            header_read_timeout_secs: 10,
            admin_auth_failures_per_minute: 60,
        }
    }
}

/// The file's keys; every one optional, unknown keys rejected (a typo must not be ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    addr: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
    database_url: Option<String>,
    admin_token: Option<String>,
    cluster_key: Option<String>,
    cluster_key_file: Option<PathBuf>,
    limits: Option<Limits>,
    events: Option<crate::events::EventSettings>,
}

/// Values given as command-line flags; `None` when the flag was not given.
#[derive(Debug, Default, Clone)]
pub(crate) struct Flags {
    pub config: Option<PathBuf>,
    pub addr: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
    pub database_url: Option<String>,
    pub cluster_key_file: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
}

pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:8080";
pub(crate) const DEFAULT_DATA_DIR: &str = "./data";

impl Config {
    /// Resolves the configuration from the process environment and `flags`.
    pub fn load(flags: Flags) -> anyhow::Result<Config> {
        Config::resolve(flags, &|name| std::env::var(name).ok())
    }

    /// Resolves with `env` as the environment (tests pass their own). The file is
    /// `flags.config`, else `RANKD_CONFIG`, else none.
    pub fn resolve(flags: Flags, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Config> {
        let env = |name: &str| env(name).filter(|v| !v.is_empty());
        let file = match flags
            .config
            .clone()
            .or_else(|| env("RANKD_CONFIG").map(Into::into))
        {
            Some(path) => read_file(&path)?,
            None => FileConfig::default(),
        };
        let addr = match (flags.addr, env("RANKD_ADDR")) {
            (Some(a), _) => a,
            (None, Some(v)) => v
                .parse()
                .with_context(|| format!("RANKD_ADDR={v:?} is not a socket address"))?,
            (None, None) => file.addr.unwrap_or_else(|| DEFAULT_ADDR.parse().unwrap()),
        };
        let data_dir = flags
            .data_dir
            .or_else(|| env("RANKD_DATA_DIR").map(Into::into))
            .or(file.data_dir)
            .unwrap_or_else(|| DEFAULT_DATA_DIR.into());
        // `DATABASE_URL` is the name most tools use; `RANKD_DATABASE_URL` wins when both are set.
        let database_url = flags
            .database_url
            .or_else(|| env("RANKD_DATABASE_URL"))
            .or_else(|| env("DATABASE_URL"))
            .or(file.database_url);
        let admin_token = env("RANKD_ADMIN_TOKEN").or(file.admin_token);
        if let Some(t) = &admin_token {
            if t.trim().len() < 16 {
                anyhow::bail!("the admin token must be at least 16 characters long");
            }
        }
        let cluster_key = match (
            flags
                .cluster_key_file
                .or_else(|| env("RANKD_CLUSTER_KEY_FILE").map(Into::into)),
            env("RANKD_CLUSTER_KEY"),
        ) {
            (Some(path), _) => Some(read_key(&path)?),
            (None, Some(key)) => Some(key),
            (None, None) => match (file.cluster_key_file, file.cluster_key) {
                (Some(path), _) => Some(read_key(&path)?),
                (None, key) => key,
            },
        };
        let cluster_key = cluster_key
            .map(|k| {
                ClusterKey::new(&k)
                    .map_err(anyhow::Error::msg)
                    .map(|c| (k, c))
            })
            .transpose()?
            .map(|(k, c)| match &admin_token {
                Some(t) if t.trim() == k.trim() => Err(anyhow::anyhow!(
                    "the cluster key must differ from the admin token (a leaf would otherwise \
                     hold its root's admin credential)"
                )),
                _ => Ok(c),
            })
            .transpose()?;
        let path = |flag: Option<PathBuf>, name: &str| flag.or_else(|| env(name).map(Into::into));
        let tls = match (
            path(flags.tls_cert, "RANKD_TLS_CERT"),
            path(flags.tls_key, "RANKD_TLS_KEY"),
        ) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => anyhow::bail!(
                "TLS needs both a certificate and its key (--tls-cert and --tls-key, or \
                 RANKD_TLS_CERT and RANKD_TLS_KEY)"
            ),
        };
        let tls_ca = path(flags.tls_ca, "RANKD_TLS_CA");
        let mut limits = file.limits.unwrap_or_default();
        env_number("RANKD_MAX_BODY_BYTES", &env, &mut limits.max_body_bytes)?;
        env_number(
            "RANKD_MAX_CONCURRENT_REQUESTS",
            &env,
            &mut limits.max_concurrent_requests,
        )?;
        env_number(
            "RANKD_REQUEST_TIMEOUT_SECS",
            &env,
            &mut limits.request_timeout_secs,
        )?;
        env_number("RANKD_MAX_CONNECTIONS", &env, &mut limits.max_connections)?;
        env_number(
            "RANKD_HEADER_READ_TIMEOUT_SECS",
            &env,
            &mut limits.header_read_timeout_secs,
        )?;
        env_number(
            "RANKD_ADMIN_AUTH_FAILURES_PER_MINUTE",
            &env,
            &mut limits.admin_auth_failures_per_minute,
        )?;
        if limits.max_concurrent_requests == 0
            || limits.request_timeout_secs == 0
            || limits.max_connections == 0
            || limits.header_read_timeout_secs == 0
            || limits.admin_auth_failures_per_minute == 0
        {
            anyhow::bail!(
                "limits.max_concurrent_requests, request_timeout_secs, max_connections, \
                 header_read_timeout_secs and admin_auth_failures_per_minute must be > 0"
            );
        }
        let mut events = file.events.unwrap_or_default();
        env_number(
            "RANKD_EVENTS_LOG_IMPRESSIONS",
            &env,
            &mut events.log_impressions,
        )?;
        env_number(
            "RANKD_EVENTS_RETENTION_DAYS",
            &env,
            &mut events.retention_days,
        )?;
        env_number(
            "RANKD_EVENTS_QUEUE_CAPACITY",
            &env,
            &mut events.queue_capacity,
        )?;
        env_number(
            "RANKD_EVENTS_MAX_PER_SECOND",
            &env,
            &mut events.max_per_second,
        )?;
        env_number(
            "RANKD_EVENTS_MAX_BODY_BYTES",
            &env,
            &mut events.max_body_bytes,
        )?;
        env_number(
            "RANKD_EVENTS_MAX_PER_REQUEST",
            &env,
            &mut events.max_per_request,
        )?;
        env_number("RANKD_EVENTS_SWAP_SHARE", &env, &mut events.swap_share)?;
        env_number(
            "RANKD_EVENTS_MAX_TRAINING_PAGES",
            &env,
            &mut events.max_training_pages,
        )?;
        if !(0.0..=1.0).contains(&events.swap_share) {
            anyhow::bail!(
                "events.swap_share must be between 0 and 1, got {}",
                events.swap_share
            );
        }
        if events.retention_days == 0
            || events.queue_capacity == 0
            || events.max_per_second == 0
            || events.max_body_bytes == 0
            || events.max_per_request == 0
            || events.max_training_pages == 0
        {
            anyhow::bail!(
                "events.retention_days, queue_capacity, max_per_second, max_body_bytes, \
                 max_per_request and max_training_pages must be > 0"
            );
        }
        Ok(Config {
            addr,
            data_dir,
            database_url,
            admin_token,
            cluster_key,
            tls,
            tls_ca,
            limits,
            events,
        })
    }

    /// The server's TLS configuration, loaded from its files (`None`: plain HTTP).
    pub fn server_tls(&self) -> anyhow::Result<Option<std::sync::Arc<rustls::ServerConfig>>> {
        self.tls
            .as_ref()
            .map(|(cert, key)| crate::tls::server_config(cert, key))
            .transpose()
    }

    /// `https` with TLS, else `http`: how the server's URLs begin.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// The database URL in effect: the configured one, or SQLite in the data directory.
    pub fn database_url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| crate::db::default_url(&self.data_dir))
    }
}

fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the configuration file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("in the configuration file {}", path.display()))
}

/// A key file's content.
fn read_key(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the cluster key file {}", path.display()))
}

fn env_number<T: std::str::FromStr>(
    name: &str,
    env: &dyn Fn(&str) -> Option<String>,
    slot: &mut T,
) -> anyhow::Result<()>
where
    T::Err: std::fmt::Display,
{
    if let Some(v) = env(name) {
        *slot = v
            .trim()
            .parse()
            .map_err(|e| anyhow::anyhow!("{name}={v:?} is not valid here: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn with_file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rankd.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    const FILE: &str = r#"
        addr = "127.0.0.1:7000"
        data_dir = "/from/file"
        database_url = "sqlite:///from/file.db"
        admin_token = "file-token-0123456789"
        [limits]
        max_body_bytes = 1000
    "#;

    #[test]
    fn defaults_without_file_env_or_flags() {
        let c = Config::resolve(Flags::default(), &env(&[])).unwrap();
        assert_eq!(c.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert_eq!(c.database_url, None);
        assert_eq!(c.admin_token, None);
        assert_eq!(c.limits.max_body_bytes, 16 << 20);
        assert_eq!(
            c.database_url(),
            "sqlite://./data/rankd.db?mode=rwc".to_string()
        );
    }

    #[test]
    fn flags_override_env_override_file() {
        let (_d, path) = with_file(FILE);
        let flags = Flags {
            config: Some(path.clone()),
            ..Flags::default()
        };
        let c = Config::resolve(flags.clone(), &env(&[])).unwrap();
        assert_eq!(c.addr, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("/from/file"));
        assert_eq!(c.admin_token.as_deref(), Some("file-token-0123456789"));
        assert_eq!(c.limits.max_body_bytes, 1000);
        assert_eq!(c.limits.max_concurrent_requests, 256);

        let e = env(&[
            ("RANKD_ADDR", "127.0.0.1:7001"),
            ("RANKD_DATA_DIR", "/from/env"),
            ("DATABASE_URL", "postgres://generic/db"),
            ("RANKD_ADMIN_TOKEN", "env-token-0123456789"),
            ("RANKD_MAX_BODY_BYTES", "2000"),
        ]);
        let c = Config::resolve(flags.clone(), &e).unwrap();
        assert_eq!(c.addr, "127.0.0.1:7001".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("/from/env"));
        assert_eq!(c.database_url.as_deref(), Some("postgres://generic/db"));
        assert_eq!(c.admin_token.as_deref(), Some("env-token-0123456789"));
        assert_eq!(c.limits.max_body_bytes, 2000);

        let e2 = env(&[
            ("DATABASE_URL", "postgres://generic/db"),
            ("RANKD_DATABASE_URL", "postgres://specific/db"),
        ]);
        let c = Config::resolve(flags.clone(), &e2).unwrap();
        assert_eq!(c.database_url.as_deref(), Some("postgres://specific/db"));

        let all_flags = Flags {
            config: Some(path),
            addr: Some("127.0.0.1:7002".parse().unwrap()),
            data_dir: Some("/from/flag".into()),
            database_url: Some("sqlite:///from/flag.db".into()),
            ..Flags::default()
        };
        let c = Config::resolve(all_flags, &e).unwrap();
        assert_eq!(c.addr, "127.0.0.1:7002".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(c.database_url.as_deref(), Some("sqlite:///from/flag.db"));
    }

    #[test]
    fn config_file_from_env_and_bad_values_are_errors() {
        let (_d, path) = with_file(FILE);
        let c = Config::resolve(
            Flags::default(),
            &env(&[("RANKD_CONFIG", path.to_str().unwrap())]),
        )
        .unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/from/file"));

        let (_d2, typo) = with_file("adress = \"127.0.0.1:1\"\n");
        let err = Config::resolve(
            Flags {
                config: Some(typo),
                ..Flags::default()
            },
            &env(&[]),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("adress"), "{err:#}");

        let err =
            Config::resolve(Flags::default(), &env(&[("RANKD_ADDR", "nowhere")])).unwrap_err();
        assert!(err.to_string().contains("RANKD_ADDR"), "{err}");
        let err = Config::resolve(Flags::default(), &env(&[("RANKD_MAX_BODY_BYTES", "lots")]))
            .unwrap_err();
        assert!(err.to_string().contains("RANKD_MAX_BODY_BYTES"), "{err}");
        let err =
            Config::resolve(Flags::default(), &env(&[("RANKD_ADMIN_TOKEN", "short")])).unwrap_err();
        assert!(err.to_string().contains("16 characters"), "{err}");
    }

    #[test]
    fn cluster_key_from_file_env_or_config_and_never_the_admin_token() {
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("cluster.key");
        std::fs::write(&key_file, "file-cluster-key-0123\n").unwrap();
        let key = |k: &str| Some(ClusterKey::new(k).unwrap());
        let c = Config::resolve(Flags::default(), &env(&[])).unwrap();
        assert_eq!(c.cluster_key, None);
        let from_env = env(&[("RANKD_CLUSTER_KEY", "env-cluster-key-0123")]);
        let c = Config::resolve(Flags::default(), &from_env).unwrap();
        assert_eq!(c.cluster_key, key("env-cluster-key-0123"));
        let flags = Flags {
            cluster_key_file: Some(key_file.clone()),
            ..Flags::default()
        };
        let c = Config::resolve(flags, &from_env).unwrap();
        assert_eq!(c.cluster_key, key("file-cluster-key-0123"));
        let (_d, path) = with_file(&format!("cluster_key_file = {key_file:?}"));
        let flags = Flags {
            config: Some(path),
            ..Flags::default()
        };
        let c = Config::resolve(flags, &env(&[])).unwrap();
        assert_eq!(c.cluster_key, key("file-cluster-key-0123"));
        let short = env(&[("RANKD_CLUSTER_KEY", "short")]);
        assert!(Config::resolve(Flags::default(), &short).is_err());
        let same = env(&[
            ("RANKD_CLUSTER_KEY", "same-secret-0123456789"),
            ("RANKD_ADMIN_TOKEN", "same-secret-0123456789"),
        ]);
        let e = Config::resolve(Flags::default(), &same).unwrap_err();
        assert!(e.to_string().contains("differ from the admin token"), "{e}");
    }
}
