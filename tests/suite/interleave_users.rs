//! Issue 32's interleaving acceptance, small and fast (the full measurement on the Rust docs is
//! `examples/interleave_users.rs`, docs/EVALUATION.md): over the topic corpus's judged queries,
//! users clicking by the position-based model prefer the first phase's ranking to the same
//! window reversed with p < 0.05 within a few hundred impressions, and an A/A test (the first
//! phase against itself, a fixed horizon) rejects about as often as alpha says. And the
//! engine's interleaved search (`Engine::search_interleaved`) drafts from both rankings.

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

/// `Engine::search_interleaved` drafts from the active reranker's and the candidate's
/// rankings of one window: against itself it answers the plain search's list, split between
/// the teams; against another model every hit is in one of the two lists at most one pick
/// further than the other team's, the same seed gives the same answer, and searches it does
/// not apply to (later pages, first-phase rankings) carry no teams.
#[test]
fn interleaved_searches_draft_from_both_rankings() {
    use rankd::admin::models::{read_upload, UploadFormat};
    use rankd::search::model::ActiveModel;
    use rankd::search::{CollapseKey, Deadline, Ranking};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let data = ingest_topics(dir.path(), true);
    // The XGBoost fixture bound to rankd's feature names; `negated`: every leaf negated, a
    // model ranking the window upside down.
    let load = |negated: bool| {
        let bytes = std::fs::read(gbdt_fixtures().join("xgb_rank_ndcg.json")).unwrap();
        let text = String::from_utf8_lossy(&bytes)
            .replace("\"bm25\"", "\"bm25f\"")
            .replace("\"pagerank\"", "\"link.pagerank\"")
            .replace("\"url_depth\"", "\"url.depth\"")
            .replace("\"title_match\"", "\"title.bm25\"");
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        if negated {
            let trees = &mut json["learner"]["gradient_booster"]["model"]["trees"];
            for tree in trees.as_array_mut().unwrap() {
                let leaves: Vec<usize> = tree["left_children"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.as_i64() == Some(-1))
                    .map(|(i, _)| i)
                    .collect();
                for field in ["split_conditions", "base_weights"] {
                    for &i in &leaves {
                        let v = tree[field][i].as_f64().unwrap();
                        tree[field][i] = (-v).into();
                    }
                }
            }
        }
        let bytes = json.to_string().into_bytes();
        let model = read_upload(&bytes, Some(UploadFormat::Xgboost)).unwrap();
        ActiveModel::new(model, "m".into()).unwrap()
    };
    let active = load(false);
    let candidate = load(true);
    let same = load(false);
    let engine = Engine::new(TextIndex::open(&data, None).unwrap());
    engine.set_model(Some(Arc::new(active)));
    let ids = |hits: &[rankd::search::Hit]| hits.iter().map(|h| h.id.clone()).collect::<Vec<_>>();
    for collapse in [vec![], vec![CollapseKey::Page]] {
        let mut q = SearchQuery::new("vector basics", 8).ranking(Ranking::Rerank { window: 24 });
        q.collapse = collapse;
        let plain = engine.search(&q).unwrap();
        let a = ids(&plain.hits);
        // Against itself: the same list.
        for seed in 0..5 {
            let r = engine
                .search_interleaved(&q, Deadline::NONE, &same, seed)
                .unwrap();
            assert_eq!(ids(&r.hits), a);
            assert_eq!(r.teams.as_ref().unwrap().len(), a.len());
        }
        // Against another model: drafted from both lists.
        engine.set_model(Some(Arc::new(load(true))));
        let b = ids(&engine.search(&q).unwrap().hits);
        engine.set_model(Some(Arc::new(load(false))));
        assert_ne!(
            a, b,
            "the two models must rank differently for the test to mean much"
        );
        let mut seen_b = false;
        for seed in 0..20 {
            let r = engine
                .search_interleaved(&q, Deadline::NONE, &candidate, seed)
                .unwrap();
            let again = engine
                .search_interleaved(&q, Deadline::NONE, &candidate, seed)
                .unwrap();
            assert_eq!(ids(&r.hits), ids(&again.hits));
            let teams = r.teams.unwrap();
            assert_eq!(teams.len(), r.hits.len());
            for (hit, team) in r.hits.iter().zip(&teams) {
                let own = match team {
                    Team::A => &a,
                    Team::B => &b,
                };
                assert!(
                    own.contains(&hit.id),
                    "{} not in {team:?}'s list {own:?}",
                    hit.id
                );
                seen_b |= *team == Team::B;
            }
            // The first hit is the top of the team that picked first.
            let top = match teams[0] {
                Team::A => &a[0],
                Team::B => &b[0],
            };
            assert_eq!(&r.hits[0].id, top);
        }
        assert!(seen_b);
    }
    // Not interleaved: a later page, a first-phase ranking.
    let mut later = SearchQuery::new("vector basics", 4).ranking(Ranking::Rerank { window: 24 });
    later.offset = 4;
    let first_phase = SearchQuery::new("vector basics", 4);
    for q in [later, first_phase] {
        let r = engine
            .search_interleaved(&q, Deadline::NONE, &candidate, 1)
            .unwrap();
        assert!(r.teams.is_none());
        assert_eq!(ids(&r.hits), ids(&engine.search(&q).unwrap().hits));
    }
}
