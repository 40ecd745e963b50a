//! Imported tree models score exactly as the library that trained them (issue 15).
//!
//! `tests/fixtures/gbdt/` holds models trained by the real XGBoost 3.x and LightGBM 4.7 on
//! data with NaN, zeros of both signs and tied values, rows that sit exactly on every split
//! threshold (and one `f32` step either side), and the library's own scores of those rows
//! (`bench/gbdt_fixtures.py` made them; this test needs no Python). The RankLib model was
//! written by hand from RankLib's format; its expected scores come from an independent
//! Python evaluator doing RankLib's float arithmetic.
//!
//! Tolerance: |rankd − library| ≤ 1e-6 · max(|library|, Σ|terms|/T): rankd sums in `f64`,
//! XGBoost and RankLib in `f32`, so a sum whose terms cancel is compared at the scale of its
//! terms rather than of its (small) total. A wrong branch on any row moves a score by a
//! whole leaf value, orders of magnitude above this.

use std::path::{Path, PathBuf};

use rankd::rerank::gbdt::import::{self, Imported};
use rankd::rerank::gbdt::{CompiledForest, Forest, Node};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gbdt")
}

fn read_rows(path: &Path, width: usize) -> (Vec<f32>, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut rows = Vec::new();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.is_empty()) {
        let values: Vec<f32> = line.split('\t').map(|v| v.parse().unwrap()).collect();
        assert_eq!(values.len(), width, "{}: row width", path.display());
        rows.extend(values);
        n += 1;
    }
    (rows, n)
}

fn read_scores(path: &Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.parse().unwrap())
        .collect()
}

fn import_file(library: &str, path: &Path) -> Imported {
    let result = match library {
        "xgboost" => import::xgboost::parse(&std::fs::read(path).unwrap()),
        "lightgbm" => import::lightgbm::parse(&std::fs::read_to_string(path).unwrap()),
        "ranklib" => import::ranklib::parse(&std::fs::read_to_string(path).unwrap()),
        other => panic!("unknown library {other}"),
    };
    result.unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Σ |leaf on the row's path| + |base|: the scale of the terms the library summed.
fn term_scale(forest: &Forest, row: &[f32]) -> f64 {
    forest
        .trees
        .iter()
        .map(|t| {
            let single = Forest {
                num_features: forest.num_features,
                base_score: 0.0,
                trees: vec![t.clone()],
            };
            single.predict_row(row).abs()
        })
        .sum::<f64>()
        + forest.base_score.abs()
}

#[test]
fn imported_models_score_as_their_library() {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("manifest.json")).unwrap()).unwrap();
    let models = manifest["models"].as_array().unwrap();
    assert_eq!(models.len(), 8, "every fixture model is checked");
    let mut on_threshold_rows = 0;
    for m in models {
        let name = m["name"].as_str().unwrap();
        let library = m["library"].as_str().unwrap();
        let imported = import_file(library, &fixtures().join(m["file"].as_str().unwrap()));
        let forest = &imported.forest;
        let width = if library == "ranklib" { 5 } else { 4 };
        let (rows, n) = read_rows(&fixtures().join(format!("{name}.rows.tsv")), width);
        let want = read_scores(&fixtures().join(format!("{name}.scores.txt")));
        assert_eq!(want.len(), n, "{name}");
        // Rows are as wide as the training data; a model may use fewer columns.
        let d = forest.num_features;
        assert!(d <= width, "{name}: {d} features");
        let x: Vec<f32> = rows
            .chunks(width)
            .flat_map(|r| r[..d].iter().copied())
            .collect();
        let compiled = CompiledForest::new(forest).unwrap();
        let mut got = vec![0f64; n];
        compiled.score_into(&x, n, &mut got).unwrap();
        let mut worst = 0f64;
        for r in 0..n {
            let row = &x[r * d..(r + 1) * d];
            assert_eq!(
                got[r],
                forest.predict_row(row),
                "{name} row {r}: compiled vs reference"
            );
            let scale = want[r]
                .abs()
                .max(term_scale(forest, row) / forest.trees.len() as f64);
            let err = (got[r] - want[r]).abs() / scale;
            worst = worst.max(err);
            assert!(
                err <= 1e-6,
                "{name} row {r}: rankd {} vs {library} {} (relative {err:e})",
                got[r],
                want[r]
            );
        }
        // The probe rows really sit on the thresholds rankd stores (the exact cases).
        for tree in &forest.trees {
            for node in &tree.nodes {
                if let Node::Split {
                    feature, threshold, ..
                } = node
                {
                    on_threshold_rows += x
                        .chunks(d)
                        .filter(|r| r[*feature as usize] == *threshold)
                        .count();
                }
            }
        }
        eprintln!("{name}: {n} rows, worst relative difference {worst:e}");
        // The test can fail: read the library's rule slightly wrong and some rows move.
        let mutated = mutate(library, forest);
        let moved = (0..n)
            .filter(|&r| mutated.predict_row(&x[r * d..(r + 1) * d]) != got[r])
            .count();
        assert!(moved > 0, "{name}: a wrong split rule changes no score");
    }
    assert!(
        on_threshold_rows > 100,
        "{on_threshold_rows} rows on thresholds"
    );
}

/// The forest as a careless importer would read it: XGBoost's `x < t` taken as `x ≤ t`;
/// LightGBM's zero band and NaN default sides ignored (NaN always right); RankLib's `≤` as
/// `<`.
fn mutate(library: &str, forest: &Forest) -> Forest {
    let mut m = forest.clone();
    for tree in &mut m.trees {
        for node in &mut tree.nodes {
            if let Node::Split {
                threshold,
                nan_left,
                zero_missing,
                ..
            } = node
            {
                match library {
                    "xgboost" => *threshold = threshold.next_up(),
                    "lightgbm" => {
                        *zero_missing = false;
                        *nan_left = false;
                    }
                    _ => *threshold = threshold.next_down(),
                }
            }
        }
    }
    m
}

/// Named models bind by name to any feature set that has their names, in any order;
/// unnamed ones by position.
#[test]
fn named_models_bind_by_name() {
    let path = fixtures().join("lgb_lambdarank.txt");
    let imported = import_file("lightgbm", &path);
    let model_names = imported.feature_names.clone().unwrap();
    assert_eq!(
        model_names,
        ["bm25", "pagerank", "url_depth", "title_match"]
    );
    // rankd's set: other order, extra features.
    let set: Vec<String> = ["spam", "title_match", "bm25", "url_depth", "pagerank"]
        .map(String::from)
        .to_vec();
    let (names, bound) = imported.bind(&set).unwrap();
    let (rows, n) = read_rows(&fixtures().join("lgb_lambdarank.rows.tsv"), 4);
    let want = read_scores(&fixtures().join("lgb_lambdarank.scores.txt"));
    // The rows in the bound model's order, by name.
    let x: Vec<f32> = rows
        .chunks(4)
        .flat_map(|r| {
            names
                .iter()
                .map(|name| r[model_names.iter().position(|m| m == name).unwrap()])
                .collect::<Vec<_>>()
        })
        .collect();
    let got = CompiledForest::new(&bound).unwrap().score(&x, n).unwrap();
    for r in 0..n {
        assert!((f64::from(got[r]) - want[r]).abs() <= 1e-6 * want[r].abs().max(1.0));
    }
    let err = imported.bind(&set[..3]).unwrap_err();
    assert!(err.contains("names features pagerank, url_depth"), "{err}");
}

/// Path-dependent TreeSHAP (`rankd::rerank::gbdt::shap`) against each library's own
/// `pred_contribs`/`pred_contrib` on the fixture rows (`bench/gbdt_shap_fixtures.py`): every
/// feature's contribution and the bias (the expected value). XGBoost computes in `f32`,
/// LightGBM in `f64`: the tolerance is 1e-5 (XGBoost) or 1e-9 (LightGBM) of the row's
/// Σ|φ| + |bias|.
#[test]
fn tree_shap_matches_the_libraries_own_contributions() {
    use rankd::rerank::gbdt::shap;
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("manifest.json")).unwrap()).unwrap();
    let mut checked = 0;
    for m in manifest["models"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let library = m["library"].as_str().unwrap();
        let expected = fixtures().join(format!("{name}.contribs.tsv"));
        if library == "ranklib" {
            // RankLib files carry no covers: no contributions, and no file.
            let ext = "xml";
            let imported = import_file(library, &fixtures().join(format!("{name}.{ext}")));
            assert_eq!(shap::contributions(&imported.forest, &[0.0; 4]), None);
            assert!(!expected.exists());
            continue;
        }
        let ext = if library == "xgboost" { "json" } else { "txt" };
        let imported = import_file(library, &fixtures().join(format!("{name}.{ext}")));
        let forest = &imported.forest;
        let width = forest.num_features;
        let (rows, n) = read_rows(&fixtures().join(format!("{name}.rows.tsv")), width);
        let lines: Vec<Vec<f64>> = std::fs::read_to_string(&expected)
            .unwrap()
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.split('\t').map(|v| v.parse().unwrap()).collect())
            .collect();
        assert_eq!(
            lines.len(),
            n,
            "{name}: one contribution row per fixture row"
        );
        let bias = shap::expected_value(forest).expect("library models carry covers");
        let tolerance = if library == "xgboost" { 1e-5 } else { 1e-9 };
        for (r, want) in lines.iter().enumerate() {
            let row = &rows[r * width..(r + 1) * width];
            let phi = shap::contributions(forest, row).unwrap();
            let scale = want.iter().map(|v| v.abs()).sum::<f64>().max(1e-12);
            for (i, (got, w)) in phi.iter().chain([&bias]).zip(want).enumerate() {
                assert!(
                    (got - w).abs() <= tolerance * scale,
                    "{name} row {r} column {i}: rankd {got}, {library} {w} (row {row:?})"
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 7, "every XGBoost and LightGBM fixture is checked");
}
