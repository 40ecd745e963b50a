//! Issue 32's interleaving acceptance, small and fast (the full measurement on the Rust docs is
//! `examples/interleave_users.rs`, docs/EVALUATION.md): over the topic corpus's judged queries,
//! users clicking by the position-based model prefer the first phase's ranking to the same
//! window reversed with p < 0.05 within a few hundred impressions, and an A/A test (the first
//! phase against itself, a fixed horizon) rejects about as often as alpha says.

use std::collections::HashMap;

use rankd::interleave::simulate::{self, ClickModel, Horizon, JudgedRankings};
use rankd::interleave::Team;
use rankd::search::{Engine, SearchQuery};
use rankd::text::TextIndex;

use crate::util::*;

#[test]
fn the_better_ranker_wins_and_an_aa_test_rarely_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest_topics(dir.path(), true);
    let engine = Engine::new(TextIndex::open(&data, None).unwrap());
    let topics = ["vector", "iterator", "thread", "socket", "parser", "matrix"];
    let (mut ab, mut aa) = (Vec::new(), Vec::new());
    for (q, topic) in topics.iter().enumerate() {
        for second in ["basics", "notes"] {
            let text = format!("{topic} {second}");
            let hits = engine.search(&SearchQuery::new(text, 20)).unwrap().hits;
            let good: Vec<String> = hits.into_iter().map(|h| h.id).collect();
            let bad: Vec<String> = good.iter().rev().cloned().collect();
            let grades: HashMap<String, i32> = (0..24)
                .filter(|&i| topic_relevant(q, i))
                .map(|i| (format!("d{i}"), 1))
                .collect();
            ab.push(JudgedRankings {
                a: bad,
                b: good.clone(),
                grades: grades.clone(),
            });
            aa.push(JudgedRankings {
                a: good.clone(),
                b: good,
                grades,
            });
        }
    }
    let users = ClickModel::pbm(1);
    let until = Horizon {
        impressions: 2000,
        until_significant: true,
    };
    let mut decided = Vec::new();
    for seed in 0..20 {
        let r = simulate::run(&ab, &users, 10, until, 0.05, seed);
        let n = r
            .first_significant
            .unwrap_or_else(|| panic!("run {seed}: no decision in 2000 impressions: {r:?}"));
        assert_eq!(r.leader, Some(Team::B), "run {seed}: {r:?}");
        decided.push(n);
    }
    let median = simulate::median(&mut decided).unwrap();
    assert!(median < 300.0, "median {median} impressions: {decided:?}");
    let fixed = Horizon {
        impressions: 500,
        until_significant: false,
    };
    let rejected = (0..100)
        .filter(|&seed| simulate::run(&aa, &users, 10, fixed, 0.05, 1000 + seed).p_value < 0.05)
        .count();
    // 5 expected; 13 or more has probability < 0.2 % at a true rate of 5 %.
    assert!(
        rejected <= 12,
        "{rejected} of 100 A/A runs rejected at alpha 0.05"
    );
}
