//! The `rankd` command line (INTERFACE.md). Each subcommand lives in its own file; this one
//! holds the argument types, the shared progress-bar style and the exit-code convention:
//! 0 ok, 2 bad usage or bad input (the message says what and where), 1 anything else; the
//! kind of the error decides (`crate::error`).

pub mod active_replay;
pub mod click_model;
pub mod cv;
pub mod demo;
pub mod distill;
pub mod embed;
pub mod eval;
pub mod eval_letor;
pub mod features;
pub mod fuse;
pub mod gbdt;
pub mod graph;
pub mod ingest;
pub mod learn;
pub mod publish;
pub mod serve;
pub mod simulate_clicks;
pub mod store;
pub mod train;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(name = "rankd", version, about = "A search-engine ranking server")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Ingest the Rust documentation installed by rustup and serve it.
    Demo(demo::DemoArgs),
    /// Add or update documents (same `id` = update), in one atomic commit.
    Ingest(ingest::IngestArgs),
    /// Build the link graph and compute all link scores (SPEC §2).
    Graph(graph::GraphArgs),
    /// Run every query against the index and score the run (SPEC §4).
    Eval(eval::EvalArgs),
    /// Compute the documents' vectors of a data directory (dense and hybrid search), or print
    /// the vectors of texts (default: a static model distilled once from all-MiniLM-L6-v2).
    Embed(embed::EmbedArgs),
    /// Distil a static embedding model (Model2Vec's method) from a sentence-transformer.
    Distill(distill::DistillArgs),
    /// Fuse TREC run files into one (SPEC §6): RRF, CombSUM, CombMNZ, Borda, Condorcet.
    Fuse(fuse::FuseArgs),
    /// Serve the HTTP API.
    Serve(serve::ServeArgs),
    /// Upload each shard's index to an object store as its next generation, for replicas
    /// (`serve --role leaf --store`) to fetch.
    Publish(publish::PublishArgs),
    /// Check an object store's generations (`verify`: every blob read back against its
    /// manifest).
    Store(store::StoreArgs),
    /// Cross-validate the reranker on judgments over the index (SPEC §3.5).
    Cv(cv::CvArgs),
    /// Log the feature vectors of judged (query, doc) pairs as SVMlight/LETOR.
    Features(features::FeaturesArgs),
    /// Derive known-item judgments from the Rust docs' API item summaries.
    KnownItems(features::KnownItemsArgs),
    /// Train a reranker and write its model file (SPEC §3.5).
    Train(train::TrainArgs),
    /// Train on a LETOR file and report NDCG@{1,3,5,10} and MAP on a test file.
    EvalLetor(eval_letor::EvalLetorArgs),
    /// Draw click sessions from a LETOR file's labels (SPEC §11's semi-synthetic protocol)
    /// for `eval-letor --train-clicks`.
    SimulateClicks(simulate_clicks::SimulateClicksArgs),
    /// Fit click models (PBM, UBM, cascade, DBN; SPEC §11) to click sessions and compare them
    /// by log-likelihood and perplexity on held-out sessions.
    ClickModel(click_model::ClickModelArgs),
    /// Replay batch active learning (SPEC §5) on a judged LETOR set: random, margin and
    /// angle-diverse batches compared on held-out MAP.
    ActiveReplay(active_replay::ActiveReplayArgs),
}

/// Options every command shares.
#[derive(clap::Args, Debug, Clone)]
pub struct DataArgs {
    /// Where the index and everything derived from it live.
    #[arg(long, env = "RANKD_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Index configuration (fields, analyzers, model parameters). Default: the one stored
    /// with the index, or the built-in `index/rankd.toml` for a new index.
    #[arg(long)]
    pub index_config: Option<PathBuf>,
}

impl DataArgs {
    /// The server's configuration, as `rankd serve` resolves it, with the database URL `flag`
    /// (else the environment, the configuration file, the SQLite file in the data directory).
    pub(crate) fn server_config(
        &self,
        flag: Option<String>,
    ) -> anyhow::Result<crate::config::Config> {
        crate::config::Config::load(crate::config::Flags {
            data_dir: Some(self.data_dir.clone()),
            database_url: flag,
            ..Default::default()
        })
        .map_err(|e| crate::error::Invalid(format!("{e:#}")).into())
    }

    /// The database URL by the precedence `rankd serve` uses: `flag`, the environment, the
    /// configuration file, else the SQLite file in the data directory.
    pub fn database_url(&self, flag: Option<String>) -> anyhow::Result<String> {
        Ok(self.server_config(flag)?.database_url())
    }

    pub fn config(&self) -> anyhow::Result<Option<crate::text::IndexConfig>> {
        self.index_config
            .as_deref()
            .map(crate::text::IndexConfig::load)
            .transpose()
            .map_err(|e| crate::error::Invalid(format!("{e:#}")).into())
    }
}

/// Runs the command; the exit code follows the convention above.
pub fn run(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Ingest(a) => ingest::run(a),
        Command::Graph(a) => graph::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Embed(a) => embed::run(a),
        Command::Distill(a) => distill::run(a),
        Command::Fuse(a) => fuse::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Publish(a) => publish::run(a),
        Command::Store(a) => store::run(a),
        Command::Cv(a) => cv::run(a),
        Command::Features(a) => features::run_features(a),
        Command::KnownItems(a) => features::run_known_items(a),
        Command::Train(a) => train::run(a),
        Command::EvalLetor(a) => eval_letor::run(a),
        Command::SimulateClicks(a) => simulate_clicks::run(a),
        Command::ClickModel(a) => click_model::run(a),
        Command::ActiveReplay(a) => active_replay::run(a),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            crate::search::error::kind_of(&e).exit_code()
        }
    }
}

/// A progress bar on stderr (drawn only on a terminal, hidden with `--json`).
pub fn progress(len: u64, what: &str, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// Runs `work` on the database at `url`, on a runtime of its own (the commands are
/// synchronous).
pub(crate) fn on_database<T, F>(
    url: &str,
    work: impl FnOnce(crate::db::Db) -> F,
) -> anyhow::Result<T>
where
    F: std::future::Future<Output = anyhow::Result<T>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async { work(crate::db::Db::open(url).await?).await })
}

/// The server's newest logged first pages and their clicks, from its database: as many as
/// its `[events] max_training_pages`.
pub(crate) fn logged_first_pages(
    config: &crate::config::Config,
) -> anyhow::Result<Vec<crate::db::events::ClickedPage>> {
    let url = config.database_url();
    let newest = config.events.max_training_pages;
    let pages = on_database(&url, |db| async move {
        Ok(db
            .first_page_sessions(crate::db::events::Pages::All, newest)
            .await?)
    })?;
    if pages.is_empty() {
        return Err(crate::error::Invalid(format!(
            "the database ({}) holds no logged first page: serve searches with \
             [events] log_impressions on, and post their clicks to /events",
            crate::db::redact(&url)
        ))
        .into());
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    /// clap's own consistency checks (unique argument names across flattened option groups,
    /// ...), which otherwise fire only when a subcommand is first run.
    #[test]
    fn the_command_line_is_consistent() {
        <super::Cli as clap::CommandFactory>::command().debug_assert();
    }
}
