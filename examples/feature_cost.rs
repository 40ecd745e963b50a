//! Cost of feature extraction on first-phase windows (SPEC §3.1): for every query, the BM25F
//! top `window`, then the whole feature set (`features::extract`) and the RM3 features alone
//! (`features::prf::extract`, feedback documents read and analysed plus its postings walks),
//! each timed separately. Prints p50/p99/mean in ms over all queries and passes as JSON.
//!
//! ```text
//! cargo run --example feature_cost -- --data-dir DIR --queries FILE [--cranfield] [--window 100]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use rankd::features::{self, Candidate, FeatureMatrix, FeatureSet};
use rankd::text::stats::Stats;
use rankd::text::{ModelKind, TextIndex};
use serde_json::json;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    data_dir: PathBuf,
    /// One query per line, or Cranfield's `cran.qry` with `--cranfield`.
    #[arg(long)]
    queries: PathBuf,
    #[arg(long)]
    cranfield: bool,
    #[arg(long, default_value_t = 100)]
    window: usize,
    #[arg(long, default_value_t = 3)]
    passes: usize,
}

fn summary(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    json!({
        "p50_ms": at(0.5),
        "p99_ms": at(0.99),
        "mean_ms": v.iter().sum::<f64>() / v.len() as f64,
    })
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let index = TextIndex::open(&args.data_dir, None)?;
    let links = rankd::links::load(&index)?;
    let queries: Vec<String> = if args.cranfield {
        rankd::corpus::cranfield::read_queries(&args.queries)?
            .into_iter()
            .map(|q| q.text)
            .collect()
    } else {
        std::fs::read_to_string(&args.queries)?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    };
    let set = FeatureSet::current();
    let searcher = index.reader.searcher();
    let (mut all, mut rm3) = (Vec::new(), Vec::new());
    for _ in 0..args.passes {
        for q in &queries {
            let q = &rankd::text::query::AnalyzedQuery::new(q.as_str());
            let stats = Stats::new(&searcher);
            let Some(bound) = index.bind(&stats, ModelKind::Bm25F, None, q)? else {
                continue;
            };
            let candidates: Vec<Candidate> = bound.top(
                &searcher,
                index.doc_columns(&searcher)?.as_ref(),
                &stats,
                args.window,
                0,
            )?;
            let t = Instant::now();
            features::extract(
                features::View {
                    query: q,
                    index: &index,
                    searcher: &searcher,
                    stats: &stats,
                    links: links.as_ref(),
                    dense: None,
                },
                set,
                &candidates,
                features::Extraction::full(features::Prf::Compute),
            )?;
            all.push(t.elapsed().as_secs_f64() * 1e3);
            let mut m = FeatureMatrix {
                rows: candidates.len(),
                cols: set.len(),
                values: vec![0.0; candidates.len() * set.len()],
            };
            let t = Instant::now();
            features::prf::extract(&index, &searcher, &stats, set, q, &candidates, &mut m)?;
            rm3.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    println!(
        "{}",
        json!({
            "queries": queries.len(),
            "passes": args.passes,
            "window": args.window,
            "features": set.len(),
            "extract_all": summary(all),
            "extract_rm3_only": summary(rm3),
        })
    );
    Ok(())
}
