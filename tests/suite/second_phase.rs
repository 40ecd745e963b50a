//! Two-phase search (SPEC §3) against a recomputation: the page a reranked search returns is
//! the first-phase window re-sorted by the model's scores of independently extracted
//! features; paging, explanations and the window rules behave as documented.

use std::sync::atomic::AtomicBool;

use rankd::features::{extract, Candidate, FeatureSet};
use rankd::rerank::{MetricConvention, NetworkParams, Objective, ObjectiveKind, TrainConfig};
use rankd::search::model::ActiveModel;
use rankd::search::{Engine, Ranking, SearchQuery};
use rankd::text::{IndexConfig, ModelKind, TextIndex};
use rankd::training::{judged_windows, train_on_windows};

use crate::util::{first_phase, title_word_judgments, word_corpus};

fn config() -> TrainConfig {
    TrainConfig {
        objective: Objective::with_defaults(ObjectiveKind::StableAp, 0.1, 1),
        network: NetworkParams {
            hidden: Vec::new(),
            activation: rankd::rerank::Activation::Relu,
            norm: rankd::rerank::NormKind::ZScore,
            lr: 0.01,
            epochs: 8,
            batch: 4,
            patience: 8,
            ..NetworkParams::default()
        },
        gbdt: None,
        seed: 3,
        convention: MetricConvention::Trec,
        source: "test".into(),
        parent: None,
        click_lists: None,
    }
}

#[test]
fn reranked_pages_follow_the_model_scores() {
    let dir = tempfile::tempdir().unwrap();
    let index = TextIndex::open_or_create(dir.path(), Some(IndexConfig::default())).unwrap();
    let docs = word_corpus();
    index.upsert(docs.iter().cloned()).unwrap();
    // Judgments: a document is relevant to "w1 w2" when its title holds w1.
    let queries = title_word_judgments(&docs);
    let engine = Engine::new(index);
    let (windows, stats) = judged_windows(
        &engine,
        &queries,
        ModelKind::Bm25F,
        40,
        rankd::features::Prf::Skip,
        &|| {},
    )
    .unwrap();
    assert_eq!(stats.queries, 12);
    let outcome = train_on_windows(
        &windows,
        &config(),
        0.25,
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    let model = ActiveModel::new(outcome.model.clone(), "m.json".into()).unwrap();
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
        assert!(res.times.features >= 0.0 && res.times.rerank >= 0.0);
        assert_eq!(res.reranker.as_deref(), Some(outcome.model.id()));
        // Recompute: first phase top 30, features, model scores, stable sort.
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
        // The model's own columns (training left the RM3 features out), by name.
        let set = FeatureSet::current();
        let cols: Vec<usize> = outcome
            .model
            .feature_names()
            .iter()
            .map(|n| set.get(n).unwrap())
            .collect();
        let m = &m;
        let x: Vec<f32> = (0..m.rows)
            .flat_map(|r| cols.iter().map(move |&c| m.row(r)[c]))
            .collect();
        let scores = outcome.model.score(&x, m.rows).unwrap();
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        let want: Vec<&str> = order.iter().take(10).map(|&i| ids[i].as_str()).collect();
        let got: Vec<&str> = res.hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(got, want, "{q}");
        for (hit, &row) in res.hits.iter().zip(&order) {
            assert_eq!(hit.score, scores[row]);
            let e = serde_json::to_value(hit.explain.as_ref().unwrap()).unwrap();
            assert_eq!(e["first_phase_rank"], row + 1);
            assert_eq!(
                e["first_phase_score"].as_f64().unwrap() as f32,
                cands[row].score
            );
            // Linear model: contributions + bias = score.
            let sum: f64 = e["contributions"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_f64().unwrap())
                .sum();
            let bias = outcome.model.linear_bias().unwrap() as f64;
            assert!((sum + bias - hit.score as f64).abs() < 1e-3 * (1.0 + sum.abs()));
        }
        // Page 2 continues page 1.
        let mut req2 = SearchQuery::new(q, 10)
            .model(ModelKind::Bm25F)
            .ranking(Ranking::Rerank { window });
        req2.offset = 10;
        let page2 = engine.search(&req2).unwrap();
        let want2: Vec<&str> = order
            .iter()
            .skip(10)
            .take(10)
            .map(|&i| ids[i].as_str())
            .collect();
        let got2: Vec<&str> = page2.hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(got2, want2);
        assert_eq!(page2.hits[0].rank, 11);
    }
    // offset + k beyond the window, and windows outside 1..=1000, are errors naming the field.
    let mut req = SearchQuery::new("rust", 10).ranking(Ranking::Rerank { window: 100 });
    req.offset = 95;
    let e = engine.search(&req).unwrap_err();
    assert!(e.to_string().contains("window"), "{e}");
    for w in [0, 1001] {
        let req = SearchQuery::new("rust", 10).ranking(Ranking::Rerank { window: w });
        let e = engine.search(&req).unwrap_err();
        assert!(e.to_string().starts_with("window"), "{e}");
    }
}

#[test]
fn a_model_needing_unknown_features_is_refused_by_name() {
    use rankd::rerank::{Net, NormKind, Normalizer, Reranker};
    let names = vec!["bm25f".to_string(), "clicks.last_week".to_string()];
    let norm = Normalizer::fit(NormKind::ZScore, &[1.0, 2.0, 3.0, 5.0], 2).unwrap();
    let net = Net::new(2, &[], rankd::rerank::Activation::Relu, 1).unwrap();
    let training = rankd::rerank::TrainingInfo {
        objective: Objective::with_defaults(ObjectiveKind::StableAp, 0.1, 1),
        optimizer: Some(rankd::rerank::UnifiedMomentum::new(0.01, 0.9, 1.0, 0.0)),
        epochs: 1,
        batch_queries: 1,
        patience: 1,
        seed: 1,
        best_epoch: 1,
        epochs_run: 1,
        ensemble: 1,
        average_epochs: 1,
        lr_halve_after: 0,
        sample_rows: None,
        mixup: None,
        member_best_epochs: vec![1],
        metrics: rankd::rerank::ModelMetrics {
            train: None,
            valid: None,
        },
        source: "test".into(),
        embedder: None,
    };
    let model = Reranker::new(names, norm, vec![net], training, None).unwrap();
    let e = ActiveModel::new(model, "x.json".into()).unwrap_err();
    assert!(e.to_string().contains("clicks.last_week"), "{e}");
}

/// Graph nodes found through the per-segment id-ordinal tables equal those found by id.
#[test]
fn nodes_of_documents_match_lookups_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let index = TextIndex::open_or_create(dir.path(), Some(IndexConfig::default())).unwrap();
    let docs = word_corpus();
    // Two commits: two segments.
    index.upsert(docs[..30].iter().cloned()).unwrap();
    index.upsert(docs[30..].iter().cloned()).unwrap();
    rankd::links::compute_and_store(&index, &Default::default(), None, &mut |_| {}).unwrap();
    let links = rankd::links::load(&index).unwrap().unwrap();
    let searcher = index.reader.searcher();
    assert!(searcher.segment_readers().len() >= 2);
    let all: Vec<tantivy::DocAddress> = searcher
        .segment_readers()
        .iter()
        .enumerate()
        .flat_map(|(s, r)| (0..r.max_doc()).map(move |d| tantivy::DocAddress::new(s as u32, d)))
        .collect();
    let cands: Vec<Candidate> = all
        .iter()
        .map(|&address| Candidate::new(address, 0.0))
        .collect();
    let ids = rankd::features::candidate_ids(&searcher, &cands).unwrap();
    // Twice: the second call reads the cached tables.
    for _ in 0..2 {
        let nodes = links.nodes_of(&searcher, &all).unwrap();
        let mut found = 0;
        for (id, node) in ids.iter().zip(&nodes) {
            assert_eq!(*node, links.node(id), "{id}");
            found += usize::from(node.is_some());
        }
        assert_eq!(found, docs.len());
    }
}
