//! Distils a static embedding model (Model2Vec's method, `rankd::embed::distill`) from a
//! sentence-transformer directory and says how long it took (docs/BENCHMARKS.md, "Sentence
//! embeddings").
//!
//! ```text
//! cargo run --release --example embed_distill -- OUT_DIR [MODEL_DIR]
//! ```
//! MODEL_DIR defaults to the default model (all-MiniLM-L6-v2, in the cache); OUT_DIR must not
//! exist. Defaults as model2vec's `distill`: PCA to 256 dimensions, SIF coefficient 1e-4,
//! float16 table. Threads: RAYON_NUM_THREADS.

use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rankd::embed::distill::{distill, DistillSettings};
use rankd::embed::Embedder;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(
        args.next()
            .ok_or_else(|| anyhow::anyhow!("usage: OUT_DIR [MODEL_DIR]"))?,
    );
    let source = args.next().map(PathBuf::from);
    let start = Instant::now();
    let embedder = Embedder::load_or_default(source.as_deref())?;
    let bar = ProgressBar::new(0).with_style(ProgressStyle::with_template(
        "{msg} {bar:40} {pos}/{len} tokens, {per_sec}, {eta} left",
    )?);
    bar.set_message("vocabulary pass");
    let pass_start = Instant::now();
    let mut pass_seconds = 0.0;
    let distilled = distill(
        &embedder,
        &out,
        &DistillSettings::default(),
        |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            pass_seconds = pass_start.elapsed().as_secs_f64();
        },
    )?;
    bar.finish();
    let seconds = start.elapsed().as_secs_f64();
    let out_json = serde_json::json!({
        "source": embedder.dir(),
        "out": out,
        "tokens": distilled.tokens,
        "dim": distilled.dim,
        "explained_variance": distilled.explained_variance,
        "threads": std::env::var("RAYON_NUM_THREADS").ok(),
        "vocabulary_pass_seconds": pass_seconds,
        "seconds": seconds,
    });
    println!("{out_json}");
    Ok(())
}
