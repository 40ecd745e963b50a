//! A gradient-boosted tree reranker serves like the networks (issue 15): trained on judged
//! windows of an index, written as a model file, loaded by the second phase, it reorders
//! the first-phase window by its own scores of independently extracted features.

use std::sync::atomic::AtomicBool;

use rankd::features::{extract, FeatureSet};
use rankd::rerank::gbdt::train::{self, GbdtParams};
use rankd::rerank::objective::LambdaParams;
use rankd::rerank::{MetricConvention, NetworkParams, Objective, Reranker, TrainConfig};
use rankd::search::model::ActiveModel;
use rankd::search::{Engine, Ranking, SearchQuery};
use rankd::text::{IndexConfig, ModelKind, TextIndex};
use rankd::training::{judged_windows, rank_set};

use crate::util::{first_phase, title_word_judgments, word_corpus};

#[test]
fn tree_model_reranks_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let index = TextIndex::open_or_create(dir.path(), Some(IndexConfig::default())).unwrap();
    let docs = word_corpus();
    index.upsert(docs.iter().cloned()).unwrap();
    // A document is relevant to "w1 w2" when its title holds w1.
    let queries = title_word_judgments(&docs);
    let engine = Engine::new(index);
    let (windows, _) = judged_windows(
        &engine,
        &queries,
        ModelKind::Bm25F,
        40,
        rankd::features::Prf::Skip,
        &|| {},
    )
    .unwrap();
    let set = rank_set(&windows).unwrap();
    let params = GbdtParams {
        trees: 20,
        leaves: 8,
        min_data_in_leaf: 5,
        ..GbdtParams::default()
    };
    let config = TrainConfig {
        objective: Objective::LambdaNdcg(LambdaParams::default()),
        network: NetworkParams::default(),
        gbdt: Some(params),
        seed: 1,
        convention: MetricConvention::Trec,
        source: "test".into(),
        parent: None,
        click_lists: None,
    };
    let outcome = train::train(&set, None, &config, &mut |_| {}, &AtomicBool::new(false)).unwrap();
    // Through a model file, as a server loads it.
    let path = dir.path().join("trees.json");
    outcome.model.save(&path).unwrap();
    let loaded = Reranker::load(&path).unwrap();
    assert_eq!(loaded, outcome.model);
    assert_eq!(loaded.kind(), "gbdt");
    let splits = loaded
        .gbdt
        .as_ref()
        .unwrap()
        .forest
        .trees
        .iter()
        .map(|t| t.num_leaves() - 1);
    assert!(splits.sum::<usize>() > 20, "the trees learned splits");
    let model = ActiveModel::new(loaded.clone(), path.clone()).unwrap();
    let engine = engine.with_model(Some(model));
    let index = &engine.index;
    let searcher = index.reader.searcher();
    for q in ["rust vector", "graph score index", "thread"] {
        let window = 30;
        let mut req = SearchQuery::new(q, 10)
            .model(ModelKind::Bm25F)
            .ranking(Ranking::Rerank { window });
        req.explain = true;
        let res = engine.search(&req).unwrap();
        assert_eq!(res.reranker.as_deref(), Some(loaded.id()));
        // Recompute: first phase top 30, features, the forest's reference walk, stable sort.
        let cands = first_phase(index, &searcher, ModelKind::Bm25F, q, window);
        let m = extract(
            rankd::features::View {
                query: &rankd::text::query::AnalyzedQuery::new(q),
                index,
                searcher: &searcher,
                stats: &rankd::text::stats::Stats::new(&searcher),
                links: None,
                dense: None,
            },
            FeatureSet::current(),
            &cands,
            rankd::features::Extraction::full(rankd::features::Prf::Skip),
        )
        .unwrap();
        let ids = rankd::features::candidate_ids(&searcher, &cands).unwrap();
        let fs = FeatureSet::current();
        let cols: Vec<usize> = loaded
            .feature_names()
            .iter()
            .map(|n| fs.get(n).unwrap())
            .collect();
        let forest = &loaded.gbdt.as_ref().unwrap().forest;
        let scores: Vec<f32> = (0..m.rows)
            .map(|r| {
                let row: Vec<f32> = cols.iter().map(|&c| m.row(r)[c]).collect();
                forest.predict_row(&row) as f32
            })
            .collect();
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        let want: Vec<&str> = order.iter().take(10).map(|&i| ids[i].as_str()).collect();
        let got: Vec<&str> = res.hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(got, want, "{q}");
        for (hit, &row) in res.hits.iter().zip(&order) {
            assert_eq!(hit.score, scores[row]);
            let e = serde_json::to_value(hit.explain.as_ref().unwrap()).unwrap();
            assert_eq!(e["features"].as_object().unwrap().len(), cols.len());
            // TreeSHAP (rankd's trainer records covers): contributions add up to the score.
            let phi = e["contributions"].as_object().expect("tree contributions");
            assert_eq!(phi.len(), cols.len());
            let total: f64 = phi.values().map(|v| v.as_f64().unwrap()).sum::<f64>()
                + e["base_score"].as_f64().unwrap();
            assert!(
                (total - f64::from(hit.score)).abs() < 1e-3 * f64::from(hit.score).abs().max(1.0),
                "{q}: Σφ + E[f] = {total}, score {}",
                hit.score
            );
        }
    }
}
