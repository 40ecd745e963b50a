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

use std::path::Path;

use rankd::rerank::gbdt::import::{self, Imported};
use rankd::rerank::gbdt::{CompiledForest, Forest, Node};

use crate::util::gbdt_fixtures;

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
        serde_json::from_slice(&std::fs::read(gbdt_fixtures().join("manifest.json")).unwrap())
            .unwrap();
    let models = manifest["models"].as_array().unwrap();
    assert_eq!(models.len(), 8, "every fixture model is checked");
    let mut on_threshold_rows = 0;
    for m in models {
        let name = m["name"].as_str().unwrap();
        let library = m["library"].as_str().unwrap();
        let imported = import_file(library, &gbdt_fixtures().join(m["file"].as_str().unwrap()));
        let forest = &imported.forest;
        let width = if library == "ranklib" { 5 } else { 4 };
        let (rows, n) = read_rows(&gbdt_fixtures().join(format!("{name}.rows.tsv")), width);
        let want = read_scores(&gbdt_fixtures().join(format!("{name}.scores.txt")));
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
        on_threshold_rows += rows_on_thresholds(forest, &x, d);
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
    let path = gbdt_fixtures().join("lgb_lambdarank.txt");
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
    let (rows, n) = read_rows(&gbdt_fixtures().join("lgb_lambdarank.rows.tsv"), 4);
    let want = read_scores(&gbdt_fixtures().join("lgb_lambdarank.scores.txt"));
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
        serde_json::from_slice(&std::fs::read(gbdt_fixtures().join("manifest.json")).unwrap())
            .unwrap();
    let mut checked = 0;
    for m in manifest["models"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let library = m["library"].as_str().unwrap();
        let expected = gbdt_fixtures().join(format!("{name}.contribs.tsv"));
        if library == "ranklib" {
            // RankLib files carry no covers: no contributions, and no file.
            let ext = "xml";
            let imported = import_file(library, &gbdt_fixtures().join(format!("{name}.{ext}")));
            assert_eq!(shap::contributions(&imported.forest, &[0.0; 4]), None);
            assert!(!expected.exists());
            continue;
        }
        let ext = if library == "xgboost" { "json" } else { "txt" };
        let imported = import_file(library, &gbdt_fixtures().join(format!("{name}.{ext}")));
        let forest = &imported.forest;
        let width = forest.num_features;
        let (rows, n) = read_rows(&gbdt_fixtures().join(format!("{name}.rows.tsv")), width);
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

/// A RankLib model from a public repository against RankLib's own scores (issue 15):
/// `ranklib_public.xml` is `models/solr_lambdamart_model.txt` of sujitpal/ltr-examples
/// (commit 76d999e, trained by RankLib 2.10: 103 trees, feature ids 1..25), and
/// `ranklib_public.scores.txt` is what RankLib's `Evaluator -load … -rank … -score`
/// printed for `ranklib_public.svm` (`bench/gbdt_ranklib_fixture.py` has the provenance and
/// regenerates them; this test needs no Java). A feature absent from an SVMlight line is 0 in
/// RankLib, and 0.0 in `ranklib_public.rows.tsv`.
///
/// RankLib sums `leaf · weight` (exact in `f64`) into a Java `float`, rounding after every
/// tree; rankd sums in `f64`. So: (1) rankd's own leaves, summed RankLib's way, give
/// RankLib's score bit for bit (every branch, threshold, leaf and weight is RankLib's); (2)
/// rankd's score is within 1e-6 of RankLib's relative to Σ|leaf · weight|, the scale of
/// RankLib's float rounding (measured against |score| alone the two differ by up to ~5e-6:
/// 103 roundings to `f32` of partial sums up to ~5).
#[test]
fn public_ranklib_model_scores_as_ranklib() {
    const WIDTH: usize = 25;
    let imported = import_file("ranklib", &gbdt_fixtures().join("ranklib_public.xml"));
    let forest = &imported.forest;
    assert_eq!(forest.trees.len(), 103);
    assert_eq!(
        forest.num_features, WIDTH,
        "RankLib ids 1..25 are columns 0..24"
    );
    assert_eq!(imported.feature_names, None);
    let (x, n) = read_rows(&gbdt_fixtures().join("ranklib_public.rows.tsv"), WIDTH);
    let want = read_scores(&gbdt_fixtures().join("ranklib_public.scores.txt"));
    assert_eq!(want.len(), n);
    assert!(n > 300, "{n} rows");

    let got = CompiledForest::new(forest).unwrap().score(&x, n).unwrap();
    let mut got64 = vec![0f64; n];
    CompiledForest::new(forest)
        .unwrap()
        .score_into(&x, n, &mut got64)
        .unwrap();
    // Bound by position to a feature set of 25 names, as rankd serves it: only the 20 ids
    // the splits read remain, in id order.
    let set: Vec<String> = (1..=WIDTH).map(|i| format!("f{i}")).collect();
    let (names, bound) = imported.bind(&set).unwrap();
    assert_eq!(names.len(), 20);
    let columns: Vec<usize> = names
        .iter()
        .map(|name| set.iter().position(|s| s == name).unwrap())
        .collect();
    let xb: Vec<f32> = x
        .chunks(WIDTH)
        .flat_map(|r| columns.iter().map(|&c| r[c]).collect::<Vec<_>>())
        .collect();
    let mut got_bound = vec![0f64; n];
    CompiledForest::new(&bound)
        .unwrap()
        .score_into(&xb, n, &mut got_bound)
        .unwrap();

    let (mut worst, mut worst_vs_score) = (0f64, 0f64);
    for r in 0..n {
        let row = &x[r * WIDTH..(r + 1) * WIDTH];
        assert_eq!(
            got64[r],
            forest.predict_row(row),
            "row {r}: compiled vs reference"
        );
        assert_eq!(got_bound[r], got64[r], "row {r}: bound vs positional");
        assert_eq!(f64::from(got[r]), f64::from(got64[r] as f32), "row {r}");
        // (1) RankLib's arithmetic on rankd's leaves: `s += tree.eval(dp) * weight` with
        // `float s`.
        let terms: Vec<f64> = forest.trees.iter().map(|t| t.predict_row(row)).collect();
        let ranklib_sum = terms.iter().fold(0f32, |s, &t| (f64::from(s) + t) as f32);
        assert_eq!(
            f64::from(ranklib_sum),
            want[r],
            "row {r}: rankd's leaves summed as RankLib does vs RankLib (row {row:?})"
        );
        // (2) rankd's own score.
        let scale = want[r]
            .abs()
            .max(terms.iter().map(|t| t.abs()).sum::<f64>());
        let err = (got64[r] - want[r]).abs() / scale;
        worst = worst.max(err);
        worst_vs_score = worst_vs_score.max((got64[r] - want[r]).abs() / want[r].abs());
        assert!(
            err <= 1e-6,
            "row {r}: rankd {} vs RankLib {} (relative {err:e})",
            got64[r],
            want[r]
        );
    }
    // RankLib reads a NaN value as 0 (DenseDataPoint's unknown value). RankLib 2.10's own
    // scores of one row with features 1 and 3 set to NaN (in the SVMlight file) and with
    // them absent, from the run that made the fixture: both 0.40703660249710083.
    let base: [f32; WIDTH] = [
        9.132619,
        0.28836635,
        6.5255065,
        -0.14907062,
        8.7537775,
        0.052786376,
        0.87223333,
        1.6084734,
        2.0,
        0.0,
        1.0,
        1.5061631,
        1.0,
        0.0,
        2.0,
        1.2992367,
        1.6255187,
        1.0,
        -0.7065575,
        2.0,
        0.0,
        2.081715,
        4.646383,
        1e-45,
        0.0,
    ];
    let compiled = CompiledForest::new(forest).unwrap();
    for (a, b) in [(f32::NAN, f32::NAN), (0.0, 0.0)] {
        let mut row = base;
        (row[0], row[2]) = (a, b);
        let score = compiled.score(&row, 1).unwrap()[0];
        assert!(
            (f64::from(score) - 0.40703660249710083).abs() < 1e-6,
            "features 1 and 3 = {a}: rankd {score}, RankLib 0.40703660249710083"
        );
    }
    // The same for every fixture row: its zeros made NaN score the same.
    let nan_rows: Vec<f32> = x
        .iter()
        .map(|&v| if v == 0.0 { f32::NAN } else { v })
        .collect();
    let mut got_nan = vec![0f64; n];
    compiled.score_into(&nan_rows, n, &mut got_nan).unwrap();
    assert_eq!(got_nan, got64, "NaN must read as 0");
    // The rows sit on thresholds (and a float32 step either side), and read zeros.
    let on_threshold = rows_on_thresholds(forest, &x, WIDTH);
    assert!(
        on_threshold > 1000,
        "{on_threshold} row-splits on thresholds"
    );
    // RankLib's `≤` read as `<` moves scores: the rows can tell.
    let mutated = mutate("ranklib", forest);
    let moved = (0..n)
        .filter(|&r| mutated.predict_row(&x[r * WIDTH..(r + 1) * WIDTH]) != got64[r])
        .count();
    assert!(moved > n / 4, "{moved} of {n} rows move under `<`");
    eprintln!(
        "ranklib_public: {n} rows, {on_threshold} row-splits on thresholds, {moved} move under \
         `<`; worst relative difference {worst:e} (of Σ|terms|), {worst_vs_score:e} (of |score|)"
    );
}

/// How many (row, split) pairs of `x` (rows of `width` values) sit exactly on the split's
/// threshold: the probe rows must reach the `≤` edge cases.
fn rows_on_thresholds(forest: &Forest, x: &[f32], width: usize) -> usize {
    let mut count = 0;
    for tree in &forest.trees {
        for node in &tree.nodes {
            if let Node::Split {
                feature, threshold, ..
            } = node
            {
                count += x
                    .chunks(width)
                    .filter(|r| r[*feature as usize] == *threshold)
                    .count();
            }
        }
    }
    count
}
