//! The reranker on the real LETOR data (`../shared/data/letor-lightgbm`, data README): the
//! query counts the README gives, the one-sided queries counted, and a short training run
//! that must beat the file-order baseline the README quotes (NDCG@5 0.478).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use rankd::corpus::letor;
use rankd::rerank::{
    evaluate_scores, train, Activation, MetricConvention, NetworkParams, NormKind, Objective,
    ObjectiveKind, RankSet, TrainConfig,
};

use crate::util::shared_data;

fn data(name: &str) -> PathBuf {
    shared_data("letor-lightgbm").join(name)
}

fn sets() -> (RankSet, RankSet) {
    let train = letor::read(&data("rank.train"), Some(&data("rank.train.query"))).unwrap();
    let test = letor::read(&data("rank.test"), Some(&data("rank.test.query"))).unwrap();
    let width = train.num_features.max(test.num_features);
    (
        RankSet::from_letor_width(&train, width).unwrap(),
        RankSet::from_letor_width(&test, width).unwrap(),
    )
}

#[test]
fn readme_counts_and_one_sided_queries() {
    let (train, test) = sets();
    assert_eq!((train.queries.len(), train.num_rows()), (201, 3005));
    assert_eq!((test.queries.len(), test.num_rows()), (50, 768));
    assert_eq!(train.num_features(), 300);
    // Counted independently (a Python pass over rank.train + rank.train.query): 57 queries have
    // only labels ≥ 1, 3 only label 0; 5322 relevant/non-relevant pairs in the other 141.
    let c = train.pair_coverage(1);
    assert_eq!(
        (c.usable, c.only_positives, c.only_negatives, c.pairs),
        (141, 57, 3, 5322)
    );
    // File order reproduces the README's NDCG@5 0.478.
    let order: Vec<f32> = (0..test.num_rows()).map(|r| -(r as f32)).collect();
    let m = evaluate_scores(&test, &order, MetricConvention::Letor).unwrap();
    assert!((m.ndcg5 - 0.478).abs() < 5e-4, "{}", m.ndcg5);
}

#[test]
fn a_short_stable_ap_run_beats_file_order() {
    let (all, test) = sets();
    let (train_set, valid) = all.split_validation(0.2, 1).unwrap();
    let config = TrainConfig {
        objective: Objective::with_defaults(ObjectiveKind::StableAp, 0.1, 1),
        network: NetworkParams {
            hidden: Vec::new(),
            activation: Activation::Relu,
            norm: NormKind::ZScore,
            lr: 0.01,
            epochs: 3,
            batch: 16,
            patience: 3,
            ..NetworkParams::default()
        },
        gbdt: None,
        seed: 1,
        convention: MetricConvention::Letor,
        source: "rank.train".into(),
        parent: None,
        click_lists: None,
    };
    let out = train(
        &train_set,
        Some(&valid),
        &config,
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    let scores = out.model.score(&test.x, test.num_rows()).unwrap();
    let m = evaluate_scores(&test, &scores, MetricConvention::Letor).unwrap();
    assert!(
        m.ndcg5 > 0.55,
        "NDCG@5 {} is not above file order (0.478) by a margin",
        m.ndcg5
    );
}
