//! `rankd serve`: open the index and the database and serve the HTTP API. Settings come from
//! flags, `RANKD_*` variables and a TOML file, in that precedence (`crate::config`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use crate::admin::auth::FailureThrottle;
use crate::admin::Ops;
use crate::api::cluster::RootState;
use crate::api::{self, AppState};
use crate::config::{Config, Flags};
use crate::db::{redact, Db};
use crate::error::Invalid;
use crate::text::TextIndex;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// TOML configuration file (or `RANKD_CONFIG`); see the README for its keys.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen address [env: RANKD_ADDR] [default: 127.0.0.1:8080].
    #[arg(long)]
    pub addr: Option<SocketAddr>,
    /// Where the index and everything derived from it live [env: RANKD_DATA_DIR]
    /// [default: ./data].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// `postgres://..` or `sqlite:PATH` [env: RANKD_DATABASE_URL or DATABASE_URL]
    /// [default: SQLite in DATA_DIR/rankd.db].
    #[arg(long)]
    pub database_url: Option<String>,
    /// Index configuration overriding the stored one's scoring parameters.
    #[arg(long)]
    pub index_config: Option<PathBuf>,
    /// `single` serves one index; `leaf` serves it also as one shard of a collection
    /// (`/cluster/v1/*`); `root` searches a collection whose shards leaves serve (`--shard`),
    /// holding no index itself.
    #[arg(long, value_enum, default_value_t = Role::Single)]
    pub role: Role,
    /// With `--role root`: the base URLs of each shard's leaves, in shard order (repeat the
    /// flag; replicas of one shard comma-separated: `--shard http://a:8101,http://b:8101`).
    #[arg(long = "shard", value_name = "URL[,URL..]")]
    pub shards: Vec<String>,
    /// With `--role root`: how long one call to a leaf may take before the root tries the
    /// shard's next replica.
    #[arg(long, default_value_t = 1000)]
    pub leaf_timeout_ms: u64,
    /// With `--role root`: answer without the shards that have no live replica (the answer
    /// says `partial: true` and names them) instead of a 503.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub allow_partial_results: bool,
    /// With `--role root`: the reranker's model file (as `rankd train` writes it).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// With `--role root`: where collection statistics come from: `gather` asks every shard
    /// per search; `table` keeps each shard's whole statistics table per index generation
    /// and sums it at the root (docs/BENCHMARKS.md compares them).
    #[arg(long, value_enum, default_value_t = StatsArg::Gather)]
    pub stats: StatsArg,
    /// With `--role leaf`: follow the generations `rankd publish` writes to this object
    /// store (`s3://BUCKET[/PREFIX]`, `file:///PATH` or a directory) for `--shard-id`: fetch
    /// the newest before serving, then switch to each new one while serving. The data
    /// directory is then a replica: its admin API is off (write to the publishing index).
    #[arg(long, env = "RANKD_STORE")]
    pub store: Option<String>,
    /// With `--store`: which shard of the collection this leaf serves.
    #[arg(long)]
    pub shard_id: Option<u32>,
    /// With `--store`: how often to look for a new generation.
    #[arg(long, default_value_t = 2000)]
    pub poll_ms: u64,
}

/// A leaf following a store's generations of one shard.
pub struct Following {
    pub store: crate::cluster::generation::Store,
    pub shard: u32,
    pub interval: Duration,
}

/// `--stats`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsArg {
    Gather,
    Table,
}

/// What a `rankd serve` process is in a collection.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Single,
    Leaf,
    Root,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let config = Config::load(Flags {
        config: args.config,
        addr: args.addr,
        data_dir: args.data_dir,
        database_url: args.database_url,
    })
    .map_err(|e| Invalid(format!("{e:#}")))?;
    if args.role == Role::Root {
        let shards = args
            .shards
            .iter()
            .map(|s| s.split(',').map(|u| u.trim().to_string()).collect())
            .collect();
        let calls = Duration::from_millis(args.leaf_timeout_ms);
        return serve_root(
            config,
            shards,
            args.model.as_deref(),
            calls,
            args.allow_partial_results,
            match args.stats {
                StatsArg::Gather => crate::cluster::root::StatsMode::Gather,
                StatsArg::Table => crate::cluster::root::StatsMode::Table,
            },
        );
    }
    if !args.shards.is_empty() || args.model.is_some() {
        return Err(Invalid("--shard and --model apply to --role root".into()).into());
    }
    let following = match (&args.store, args.shard_id) {
        (Some(_), _) | (_, Some(_)) if args.role != Role::Leaf => {
            return Err(Invalid("--store and --shard-id apply to --role leaf".into()).into())
        }
        (Some(url), Some(shard)) => {
            let store = crate::cluster::generation::Store::open(url)?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let bootstrapped = runtime.block_on(crate::cluster::generation::bootstrap(
                &store,
                &config.data_dir,
                shard,
            ));
            match bootstrapped {
                Ok(Some(a)) => eprintln!(
                    "fetched generation {} of shard {shard} from {url}: {} files, {} bytes                      ({} files reused)",
                    a.generation, a.files_fetched, a.bytes_fetched, a.files_reused
                ),
                Ok(None) => {}
                // A replica that holds a generation serves it while the store is away.
                Err(e) if crate::cluster::generation::local_generation(&config.data_dir)?.is_some() => {
                    eprintln!("warning: serving the generation in {} : {e:#}", config.data_dir.display())
                }
                Err(e) => return Err(e),
            }
            Some(Following {
                store,
                shard,
                interval: Duration::from_millis(args.poll_ms.max(10)),
            })
        }
        (Some(_), None) => return Err(Invalid("--store needs --shard-id".into()).into()),
        (None, Some(_)) => return Err(Invalid("--shard-id needs --store".into()).into()),
        (None, None) => None,
    };
    let mut config = config;
    if following.is_some() && config.admin_token.is_some() {
        eprintln!(
            "note: the admin API is off: this leaf's index follows {} (write to the publishing \
             index)",
            args.store.as_deref().unwrap_or_default()
        );
        config.admin_token = None;
    }
    let index_config = args
        .index_config
        .as_deref()
        .map(crate::text::IndexConfig::load)
        .transpose()
        .map_err(|e| Invalid(format!("{e:#}")))?;
    let index = TextIndex::open(&config.data_dir, index_config)?;
    serve_index(index, config, args.role == Role::Leaf, following)
}

/// Serves a root over the leaves at `shards`.
fn serve_root(
    config: Config,
    shards: Vec<Vec<String>>,
    model: Option<&Path>,
    leaf_timeout: Duration,
    allow_partial: bool,
    stats: crate::cluster::root::StatsMode,
) -> anyhow::Result<()> {
    if shards.is_empty() {
        return Err(Invalid("--role root needs --shard URL for every shard".into()).into());
    }
    let model = model
        .map(|path| {
            crate::search::ActiveModel::load(path)
                .map_err(|e| Invalid(format!("--model {}: {e}", path.display())))
        })
        .transpose()?;
    let timeout = Duration::from_secs(config.limits.request_timeout_secs);
    let n = shards.len();
    let root =
        crate::cluster::root::Root::connect(shards, model, timeout, leaf_timeout, allow_partial)?
            .with_stats_mode(stats);
    let state = Arc::new(RootState {
        root,
        ready: AtomicBool::new(false),
        token: config.admin_token.clone(),
    });
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(crate::api::cluster::serve_root(
        state,
        config.addr,
        &config.limits,
        |bound| eprintln!("rankd root is serving {n} shards on http://{bound}/"),
    ))
}

/// Serves `index` with `config` until SIGTERM or Ctrl-C. First removes what a crashed writer
/// left in the data directory (`crate::admin::recovery`), so the manifest is current before
/// the link scores are checked against it.
pub fn serve_index(
    index: TextIndex,
    config: Config,
    leaf: bool,
    following: Option<Following>,
) -> anyhow::Result<()> {
    let recovery = crate::admin::recovery::recover(&index)?;
    if !recovery.is_empty() {
        eprintln!(
            "recovered from an interrupted write: removed {} temporary and {} uncommitted \
             index files{}",
            recovery.temp_files.len(),
            recovery.segment_files,
            if recovery.manifest_rewritten {
                "; rewrote manifest.json, which lagged behind the index"
            } else {
                ""
            }
        );
    }
    if recovery.index_busy {
        tracing::info!(
            "another process is writing the index in {}; its files were left alone",
            index.dir.display()
        );
    }
    let docs = index.num_docs();
    let (links, links_stale) = match crate::links::load_for_serving(&index) {
        Ok(Some((l, stale))) => {
            if stale {
                eprintln!(
                    "warning: the link scores predate the last change of the index: serving \
                     them for the documents they cover; POST /admin/graph (or `rankd graph`) \
                     recomputes them"
                );
            }
            (Some(l), stale)
        }
        Ok(None) => (None, false),
        Err(e) => {
            eprintln!("warning: serving without link scores: {e:#}");
            (None, false)
        }
    };
    if links.is_none() {
        eprintln!("note: no link scores loaded; `rankd graph` computes them");
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let url = config.database_url();
        let db = Db::open(&url).await?;
        tracing::info!("database: {}", redact(&url));
        let ops = Ops::new(db, config.admin_token.as_deref(), config.limits.clone());
        let auth_failures = FailureThrottle::new(config.limits.admin_auth_failures_per_minute);
        ops.link_freshness
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stale_at_start = links_stale;
        if ops.token.is_none() {
            eprintln!("note: the admin API is disabled; set RANKD_ADMIN_TOKEN to enable it");
        }
        let loaded = crate::admin::models::sync_and_load(&ops.db, &index.dir)
            .await
            .context("cannot read the model registry")?;
        let reranker = loaded.model;
        match (&reranker, &loaded.error) {
            (Some(m), _) => eprintln!("reranking with model {} ({})", m.id(), m.path.display()),
            (None, Some(e)) => tracing::error!("{e}"),
            (None, None) => {
                eprintln!("note: no active reranker; `rankd train` or POST /admin/train makes one")
            }
        }
        crate::metrics::set_active_model(reranker.as_ref().map(|m| m.id()));
        let engine = crate::search::Engine::new(index)
            .with_links(links)
            .with_model(reranker);
        if following.is_some() {
            let held = crate::cluster::generation::local_generation(&engine.index.dir)?;
            engine.set_store_generation(held.map_or(0, |m| m.generation));
        }
        let state = Arc::new(AppState {
            engine,
            ready: AtomicBool::new(false),
            ops,
            reranker_error: Mutex::new(loaded.error),
            auth_failures,
            leaf,
        });
        if let Some(f) = following {
            tokio::spawn(crate::cluster::generation::follow(
                f.store,
                f.shard,
                state.clone(),
                f.interval,
            ));
        }
        api::serve(state, config.addr, |bound| {
            eprintln!(
                "rankd is serving {docs} documents on http://{bound}/ (try /search?q=iterator)"
            );
        })
        .await
    })
}
