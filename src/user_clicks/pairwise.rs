//! Training sets for unbiased LambdaMART (SPEC §11, "Unbiased LambdaMART";
//! [`crate::rerank::gbdt::train::unbiased`] has the weighting): the sessions themselves are
//! the training signal.
//!
//! Each query with a click becomes one group: the rows shown in at least one of its sessions
//! (in file order), labelled 1 if ever clicked (what validation and the trainer's checks
//! read; the trees do not learn from these labels), and one [`ClickList`] per session — the
//! shown rows in their logged order, with the session's clicks. The position biases are
//! learned while training, so nothing is estimated here and no click is clipped.

use std::collections::{BTreeSet, HashMap};

use super::sessions::RowSession;
use crate::error::Invalid;
use crate::rerank::gbdt::train::unbiased::{ClickList, ClickLists};
use crate::rerank::{QueryGroup, RankSet};

/// A click training set for unbiased LambdaMART (what [`super::ips::click_set`] returns with
/// [`super::ips::Debias::Pairwise`]).
#[derive(Debug, Clone)]
pub struct ListSet {
    /// One group per query with a click, its shown rows labelled "ever clicked".
    pub set: RankSet,
    /// The groups' logged lists.
    pub lists: ClickLists,
    /// Clicks on the set's queries.
    pub clicks: usize,
    /// Sessions on the set's queries.
    pub sessions: usize,
}

/// The groups and lists of `set`'s queries from `sessions` (checked against the training
/// file; sessions of other queries are skipped), with bias norm `p` = `bias_norm`.
pub fn list_set(
    set: &RankSet,
    sessions: &[RowSession],
    bias_norm: f64,
) -> Result<ListSet, Invalid> {
    let by_qid = set.query_index();
    let mut per_query: Vec<Vec<&RowSession>> = vec![Vec::new(); set.queries.len()];
    let (mut clicks, mut used) = (0, 0);
    for s in sessions {
        let Some(&qi) = by_qid.get(s.qid.as_str()) else {
            continue;
        };
        used += 1;
        clicks += s.clicks.len();
        per_query[qi].push(s);
    }
    if clicks == 0 {
        return Err(Invalid(format!(
            "no click on any of the {} queries: nothing to learn from",
            set.queries.len()
        )));
    }
    let d = set.num_features();
    let (mut x, mut labels, mut groups) = (Vec::new(), Vec::new(), Vec::new());
    let mut by_group = HashMap::new();
    for (qi, logged) in per_query.iter().enumerate() {
        if logged.iter().all(|s| s.clicks.is_empty()) {
            continue;
        }
        let q = &set.queries[qi];
        let shown: BTreeSet<usize> = logged
            .iter()
            .flat_map(|s| s.shown.iter().copied())
            .collect();
        let clicked: BTreeSet<usize> = logged
            .iter()
            .flat_map(|s| s.clicks.iter().copied())
            .collect();
        // Row of the query → row of the group.
        let at: HashMap<usize, usize> = shown.iter().enumerate().map(|(i, &r)| (r, i)).collect();
        let start = labels.len();
        for &r in &shown {
            let row = q.rows.start + r;
            x.extend_from_slice(&set.x[row * d..(row + 1) * d]);
            labels.push(i32::from(clicked.contains(&r)));
        }
        groups.push(QueryGroup::new(q.qid.clone(), start..labels.len()));
        let lists = logged
            .iter()
            .map(|s| ClickList {
                rows: s.shown.iter().map(|r| at[r]).collect(),
                clicks: s
                    .shown
                    .iter()
                    .map(|r| i32::from(s.clicks.contains(r)))
                    .collect(),
            })
            .collect();
        by_group.insert(q.qid.clone(), lists);
    }
    let set = RankSet::new(set.feature_names.clone(), x, labels, groups, None)
        .map_err(|e| Invalid(format!("click training set: {e}")))?;
    Ok(ListSet {
        set,
        clicks,
        sessions: used,
        lists: ClickLists {
            by_group,
            bias_norm,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::sessions::test_session as session;
    use super::*;

    #[test]
    fn a_query_is_one_group_and_each_session_one_list_in_shown_order() {
        let set = RankSet::new(
            vec!["f".into()],
            (0..5).map(|v| v as f32).collect(),
            vec![0; 5],
            vec![QueryGroup::new("a", 0..3), QueryGroup::new("b", 3..5)],
            None,
        )
        .unwrap();
        let sessions = [
            session("a", &[2, 0], &[0]),
            session("a", &[0, 2], &[]),
            session("b", &[1, 0], &[]), // no click on b: no group
            session("z", &[0], &[0]),   // another split's query
        ];
        let c = list_set(&set, &sessions, 2.0).unwrap();
        assert_eq!((c.clicks, c.sessions), (1, 3));
        assert_eq!(c.set.queries.len(), 1);
        // Rows 0 and 2 of "a" (row 1 never shown), row 0 clicked.
        assert_eq!(c.set.x, [0.0, 2.0]);
        assert_eq!(c.set.labels, [1, 0]);
        let lists = &c.lists.by_group["a"];
        assert_eq!(
            lists,
            &[
                ClickList {
                    rows: vec![1, 0],
                    clicks: vec![0, 1]
                },
                ClickList {
                    rows: vec![0, 1],
                    clicks: vec![0, 0]
                }
            ]
        );
    }
}
