//! Collapsing on a real index (issue 17, docs/EVALUATION.md "Collapsing"): how many of the
//! top-10 hits repeat a higher hit, before and after `collapse=`, what collapsing costs per
//! search, and SimHash's recall on pages known to be copies of one another.
//!
//! ```text
//! cargo run --release --example collapse_report -- --data-dir DIR --queries FILE [--passes 3]
//! ```
//! Searches run as the web page runs them: the default model, the newest model file of DIR
//! reranking the top 100 (if any), k = 10, snippets on. A hit "repeats" a higher one when it
//! has the same page key or a SimHash within 3 bits (`--keys`). Latency: each pass runs every
//! query without and with collapsing (interleaved), p50/p99 per pass, medians over passes.
//!
//! Known copies: the Rust docs render every item `std` re-exports from `core` or `alloc` twice
//! (`std/vec/struct.Vec.html` and `alloc/vec/struct.Vec.html`); each such pair present in the
//! index is a true duplicate, and the share within 3 bits is SimHash's recall on them. Random
//! pairs of pages give the false-positive rate.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use rankd::search::model::{self, ActiveModel};
use rankd::search::{CollapseKey, Engine, Ranking, Returns, SearchQuery, DEFAULT_WINDOW};
use rankd::text::simhash;
use rankd::text::TextIndex;
use serde_json::json;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    data_dir: PathBuf,
    /// One query per line.
    #[arg(long)]
    queries: PathBuf,
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// What collapses (comma-separated collapse keys).
    #[arg(long, default_value = "page,near_duplicate")]
    keys: String,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let keys = CollapseKey::parse_list(&args.keys).map_err(anyhow::Error::msg)?;
    let index = TextIndex::open(&args.data_dir, None)?;
    let links = rankd::links::load(&index)?;
    let active = match model::model_files(&args.data_dir)?.into_iter().next() {
        Some(p) => Some(ActiveModel::load(&p)?),
        None => None,
    };
    let reranked = active.is_some();
    let engine = Engine::new(index).with_links(links).with_model(active);
    let queries: Vec<String> = std::fs::read_to_string(&args.queries)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let base = SearchQuery {
        ranking: if reranked {
            Ranking::Rerank {
                window: DEFAULT_WINDOW,
            }
        } else {
            Ranking::FirstPhase
        },
        returns: Returns::ALL,
        ..SearchQuery::new("", 10)
    };
    let collapsed = SearchQuery {
        collapse: keys.clone(),
        ..base.clone()
    };

    // Repeats in the top 10, before and after.
    let searcher = engine.index.reader.searcher();
    let columns = engine.index.doc_columns(&searcher)?;
    let repeats = |q: &SearchQuery| -> anyhow::Result<(usize, usize, usize)> {
        let (mut hits, mut repeated, mut queries_with) = (0, 0, 0);
        for text in &queries {
            let r = engine.search(&SearchQuery {
                text: text.clone(),
                ..q.clone()
            })?;
            let k: Vec<_> = r
                .hits
                .iter()
                .map(|h| columns.collapse_keys(h.address))
                .collect();
            let mut here = 0;
            for (i, a) in k.iter().enumerate() {
                let copy = k[..i].iter().any(|b| {
                    keys.iter().any(|key| match key {
                        CollapseKey::Page => a.page.is_some() && a.page == b.page,
                        CollapseKey::Site => a.site.is_some() && a.site == b.site,
                        CollapseKey::Group => a.group.is_some() && a.group == b.group,
                        CollapseKey::NearDuplicate => matches!(
                            (a.simhash, b.simhash),
                            (Some(x), Some(y)) if simhash::near_duplicates(x, y)
                        ),
                    })
                });
                here += usize::from(copy);
            }
            hits += k.len();
            repeated += here;
            queries_with += usize::from(here > 0);
        }
        Ok((hits, repeated, queries_with))
    };
    let before = repeats(&base)?;
    let after = repeats(&collapsed)?;

    // Latency, interleaved.
    let mut p50 = [Vec::new(), Vec::new()];
    let mut p99 = [Vec::new(), Vec::new()];
    for _ in 0..args.passes {
        let mut times = [Vec::new(), Vec::new()];
        for (n, text) in queries.iter().enumerate() {
            // Alternate which runs first, so a warm cache favours neither.
            let order = if n % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let q = [&base, &collapsed][i];
                let t = Instant::now();
                engine.search(&SearchQuery {
                    text: text.clone(),
                    ..q.clone()
                })?;
                times[i].push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        for i in 0..2 {
            times[i].sort_by(f64::total_cmp);
            p50[i].push(percentile(&times[i], 0.5));
            p99[i].push(percentile(&times[i], 0.99));
        }
    }

    // SimHash on known copies: std/X against core/X or alloc/X, and an item re-exported by
    // its parent module inside one crate (`std/collections/struct.HashMap.html` and
    // `std/collections/hash_map/struct.HashMap.html`).
    let mut by_id: HashMap<String, Option<u64>> = HashMap::new();
    for (ord, reader) in searcher.segment_readers().iter().enumerate() {
        for doc in reader.doc_ids_alive() {
            let address = tantivy::DocAddress::new(ord as u32, doc);
            by_id.insert(
                columns.head(address)?.id,
                columns.collapse_keys(address).simhash,
            );
        }
    }
    let mut across_crates = Vec::new();
    let mut within_crate = Vec::new();
    for (id, h) in &by_id {
        let Some(a) = h else { continue };
        if let Some(rest) = id.strip_prefix("std/") {
            for other in ["core/", "alloc/"] {
                if let Some(Some(b)) = by_id.get(&format!("{other}{rest}")) {
                    across_crates.push(simhash::distance(*a, *b));
                }
            }
        }
        // `dir/file` against `dir/sub/file` for item pages (struct., enum., trait., fn., ...).
        let Some((dir, file)) = id.rsplit_once('/') else {
            continue;
        };
        let Some((parent, _)) = dir.rsplit_once('/') else {
            continue;
        };
        let is_item = [
            "struct.",
            "enum.",
            "trait.",
            "fn.",
            "type.",
            "macro.",
            "constant.",
        ]
        .iter()
        .any(|p| file.starts_with(p));
        if is_item
            && (id.starts_with("std/") || id.starts_with("core/") || id.starts_with("alloc/"))
        {
            if let Some(Some(b)) = by_id.get(&format!("{parent}/{file}")) {
                within_crate.push(simhash::distance(*a, *b));
            }
        }
    }
    let summary = |mut d: Vec<u32>| {
        d.sort_unstable();
        let n = d.len();
        let share = |bits: u32| d.iter().filter(|&&x| x <= bits).count() as f64 / n.max(1) as f64;
        json!({
            "pairs": n,
            "recall_at_3_bits": share(3),
            "share_at_6_bits": share(6),
            "share_at_10_bits": share(10),
            "median_distance": d.get(n / 2),
            "p90_distance": d.get(n * 9 / 10),
        })
    };
    // Random pairs, deterministic.
    let all: Vec<u64> = by_id.values().filter_map(|h| *h).collect();
    let mut state = 42u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let samples = 200_000;
    let random: Vec<u32> = (0..samples)
        .map(|_| simhash::distance(all[next() % all.len()], all[next() % all.len()]))
        .collect();
    let random_within = |bits: u32| random.iter().filter(|&&d| d <= bits).count();

    let report = json!({
        "queries": queries.len(),
        "reranked": reranked,
        "keys": args.keys,
        "top10_repeats_before": {"hits": before.0, "repeats": before.1,
            "share": before.1 as f64 / before.0.max(1) as f64, "queries_with_repeats": before.2},
        "top10_repeats_after": {"hits": after.0, "repeats": after.1,
            "share": after.1 as f64 / after.0.max(1) as f64, "queries_with_repeats": after.2},
        "latency_ms": {
            "without": {"p50": median(p50[0].clone()), "p99": median(p99[0].clone())},
            "with": {"p50": median(p50[1].clone()), "p99": median(p99[1].clone())},
            "p50_added": median(p50[1].clone()) / median(p50[0].clone()) - 1.0,
            "p99_added": median(p99[1].clone()) / median(p99[0].clone()) - 1.0,
        },
        "simhash_std_vs_core_alloc": summary(across_crates),
        "simhash_reexport_in_parent_module": summary(within_crate),
        "simhash_random_pairs": {"pairs": samples, "within_3_bits": random_within(3),
            "within_6_bits": random_within(6), "within_10_bits": random_within(10)},
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
