//! A [`Forest`] as an XGBoost JSON model (the layout XGBoost 3.x's `save_model` writes and
//! `Booster(model_file=…)` loads), so a rankd model can be checked or served by XGBoost.
//!
//! rankd's split `x ≤ t` is XGBoost's `x < t⁺` with `t⁺` the smallest `f32` above `t`
//! (exact for every `f32` x), the missing side is `default_left`, leaf values are written
//! as `f32` (XGBoost's leaf type: each leaf rounds by at most half an `f32` ulp) and
//! `base_score` is the margin (the objectives written, `rank:*`, have the identity link).
//! Two things cannot be written and are errors naming the tree and node: LightGBM's zero
//! band (`zero_missing`), and a threshold of `+∞` or `f32::MAX`, whose `t⁺` is `+∞` (JSON
//! has no infinity); rankd's trainer writes neither.
//!
//! The objective name only tells XGBoost how to continue training and which base-score
//! link to apply: `rank:ndcg` for `lambda-ndcg`, `rank:map` for `lambda-ap`, and
//! `rank:pairwise` for every other objective (all three with the identity link).

use serde_json::{json, Value};

use super::forest::{Forest, Node};
use crate::rerank::Objective;

/// The XGBoost objective a rankd objective is written as.
fn xgboost_objective(objective: &Objective) -> &'static str {
    match objective {
        Objective::LambdaNdcg(_) => "rank:ndcg",
        Objective::LambdaAp(_) => "rank:map",
        _ => "rank:pairwise",
    }
}

/// XGBoost's JSON for `forest`, whose inputs are `feature_names` (in column order).
pub(crate) fn to_xgboost_json(
    forest: &Forest,
    feature_names: &[String],
    objective: &Objective,
) -> Result<Value, String> {
    if feature_names.len() != forest.num_features {
        return Err(format!(
            "{} feature names for a forest of {} features",
            feature_names.len(),
            forest.num_features
        ));
    }
    forest.validate()?;
    let num_feature = forest.num_features.to_string();
    let mut trees = Vec::with_capacity(forest.trees.len());
    for (t, tree) in forest.trees.iter().enumerate() {
        // Breadth-first numbering, root 0 (XGBoost's own order).
        let mut order = vec![0usize];
        let mut k = 0;
        while k < order.len() {
            if let Node::Split { left, right, .. } = tree.nodes[order[k]] {
                order.push(left as usize);
                order.push(right as usize);
            }
            k += 1;
        }
        let mut new_index = vec![0i64; tree.nodes.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new as i64;
        }
        let n = order.len();
        let (mut left, mut right, mut parents) =
            (vec![-1i64; n], vec![-1i64; n], vec![i64::from(i32::MAX); n]);
        let (mut cond, mut index, mut default_left) = (vec![0f32; n], vec![0i64; n], vec![0u8; n]);
        for (new, &old) in order.iter().enumerate() {
            match tree.nodes[old] {
                Node::Leaf { value } => cond[new] = value as f32,
                Node::Split {
                    feature,
                    threshold,
                    nan_left,
                    zero_missing,
                    left: l,
                    right: r,
                } => {
                    if zero_missing {
                        return Err(format!(
                            "tree {t} node {old} treats values near zero as missing \
                             (LightGBM's zero band), which XGBoost cannot express"
                        ));
                    }
                    let above = threshold.next_up();
                    if !above.is_finite() {
                        return Err(format!(
                            "tree {t} node {old} splits at {threshold}: XGBoost's `x < t` would \
                             need t = +∞, which JSON cannot hold"
                        ));
                    }
                    cond[new] = above;
                    index[new] = i64::from(feature);
                    default_left[new] = u8::from(nan_left);
                    left[new] = new_index[l as usize];
                    right[new] = new_index[r as usize];
                    parents[left[new] as usize] = new as i64;
                    parents[right[new] as usize] = new as i64;
                }
            }
        }
        trees.push(json!({
            "base_weights": vec![0f32; n],
            "categories": [],
            "categories_nodes": [],
            "categories_segments": [],
            "categories_sizes": [],
            "default_left": default_left,
            "id": t,
            "left_children": left,
            "loss_changes": vec![0f32; n],
            "parents": parents,
            "right_children": right,
            "split_conditions": cond,
            "split_indices": index,
            "split_type": vec![0u8; n],
            // The tree's covers where it has them (XGBoost's TreeSHAP weighs by these), else
            // zeros, which the importer reads as "no covers".
            "sum_hessian": if tree.cover.is_empty() {
                vec![0f64; n]
            } else {
                order.iter().map(|&old| tree.cover[old]).collect()
            },
            "tree_param": {
                "num_deleted": "0",
                "num_feature": num_feature,
                "num_nodes": n.to_string(),
                "size_leaf_vector": "1",
            },
        }));
    }
    let count = trees.len();
    Ok(json!({
        "learner": {
            "attributes": {},
            "feature_names": feature_names,
            "feature_types": vec!["float"; feature_names.len()],
            "gradient_booster": {
                "model": {
                    "cats": {"enc": [], "feature_segments": [], "sorted_idx": []},
                    "gbtree_model_param": {
                        "num_parallel_tree": "1",
                        "num_trees": count.to_string(),
                    },
                    "iteration_indptr": (0..=count).collect::<Vec<_>>(),
                    "tree_info": vec![0; count],
                    "trees": trees,
                },
                "name": "gbtree",
            },
            "learner_model_param": {
                "base_score": format!("[{:E}]", forest.base_score as f32),
                "boost_from_average": "1",
                "num_class": "0",
                "num_feature": num_feature,
                "num_target": "1",
            },
            "objective": {
                "lambdarank_param": {
                    "lambdarank_bias_norm": "1",
                    "lambdarank_normalization": "1",
                    "lambdarank_num_pair_per_sample": "4294967295",
                    "lambdarank_pair_method": "topk",
                    "lambdarank_score_normalization": "1",
                    "lambdarank_unbiased": "0",
                    "ndcg_exp_gain": "1",
                },
                "name": xgboost_objective(objective),
            },
        },
        "version": [3, 2, 0],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::gbdt::import::xgboost;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Export, then read back with rankd's own XGBoost importer: every row reaches the same
    /// leaves (each leaf rounded to f32), including rows on the thresholds and NaN.
    #[test]
    fn round_trip_through_the_importer() {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let grid = [-1.0f32, -0.0, 0.0, 0.25, 0.5, 1.0, 3.0];
        for _ in 0..20 {
            let d = rng.random_range(1..5);
            let trees = (0..rng.random_range(1..10))
                .map(|_| {
                    let leaves = rng.random_range(1..20);
                    crate::rerank::testutil::random_tree_plain(&mut rng, d, leaves, &grid)
                })
                .collect();
            let forest = Forest {
                num_features: d,
                base_score: 0.25,
                trees,
            };
            let names: Vec<String> = (0..d).map(|i| format!("f{i}")).collect();
            let json = to_xgboost_json(&forest, &names, &Objective::LambdaNdcg(Default::default()))
                .unwrap();
            let back = xgboost::parse(json.to_string().as_bytes()).unwrap();
            assert_eq!(back.feature_names.as_deref(), Some(&names[..]));
            assert_eq!(back.objective.as_deref(), Some("rank:ndcg"));
            let rounded = Forest {
                trees: forest
                    .trees
                    .iter()
                    .map(|t| {
                        let mut t = t.clone();
                        for node in &mut t.nodes {
                            if let Node::Leaf { value } = node {
                                *value = f64::from(*value as f32);
                            }
                        }
                        t
                    })
                    .collect(),
                ..forest.clone()
            };
            for _ in 0..200 {
                let row: Vec<f32> = (0..d)
                    .map(|_| match rng.random_range(0..4) {
                        0 => f32::NAN,
                        1 => grid[rng.random_range(0..grid.len())],
                        _ => rng.random_range(-2.0..4.0),
                    })
                    .collect();
                assert_eq!(
                    back.forest.predict_row(&row),
                    rounded.predict_row(&row),
                    "{row:?}"
                );
            }
        }
    }

    #[test]
    fn what_xgboost_cannot_hold_is_refused() {
        let tree = |threshold: f32, zero_missing: bool| Forest {
            num_features: 1,
            base_score: 0.0,
            trees: vec![crate::rerank::gbdt::Tree {
                nodes: vec![
                    Node::Split {
                        feature: 0,
                        threshold,
                        nan_left: false,
                        zero_missing,
                        left: 1,
                        right: 2,
                    },
                    Node::Leaf { value: 1.0 },
                    Node::Leaf { value: 2.0 },
                ],
                cover: Vec::new(),
            }],
        };
        let names = vec!["a".to_string()];
        let o = Objective::LambdaNdcg(Default::default());
        let err = to_xgboost_json(&tree(0.5, true), &names, &o).unwrap_err();
        assert!(
            err.contains("tree 0 node 0 treats values near zero"),
            "{err}"
        );
        let err = to_xgboost_json(&tree(f32::MAX, false), &names, &o).unwrap_err();
        assert!(err.contains("would need t = +∞"), "{err}");
        assert!(to_xgboost_json(&tree(0.5, false), &[], &o).is_err());
    }
}
