//! XGBoost's JSON model (`Booster.save_model("m.json")`, XGBoost 2.x and 3.x), as its CPU
//! predictor evaluates it:
//!
//! - node `i` is a leaf iff `left_children[i] == -1`; its value is `split_conditions[i]`;
//! - otherwise `x` goes left iff `x < split_conditions[i]` (both `f32`), and a missing
//!   value (NaN) goes left iff `default_left[i]`;
//! - only nodes reachable from the root count (pruning leaves deleted nodes in the arrays);
//! - the margin is `link(base_score) + Σ leaves`, where `base_score` is stored in the
//!   objective's output space: the identity for `rank:*`, `reg:squarederror` and friends,
//!   the logit for `binary:logistic` / `reg:logistic`, the log for `count:poisson`,
//!   `reg:gamma`, `reg:tweedie`. rankd scores with the margin (no output transform).
//!
//! Numbers are read through `serde_json` with `float_roundtrip`, so every threshold is the
//! `f32` XGBoost wrote.

use serde_json::Value;

use super::{f32_below, Imported, Library};
use crate::rerank::gbdt::forest::{Forest, Node, Tree};

/// Parses an XGBoost JSON model; errors name the JSON path and, inside a tree, the tree
/// and node.
pub fn parse(bytes: &[u8]) -> Result<Imported, String> {
    let root: Value = serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON ({e})"))?;
    let learner = field(&root, "learner", "")?;
    let param = field(learner, "learner_model_param", "learner")?;
    let num_feature = string_number(param, "num_feature", "learner.learner_model_param")?;
    if !(num_feature >= 0.0 && num_feature.fract() == 0.0) {
        return Err(format!(
            "learner.learner_model_param.num_feature {num_feature} is not a feature count"
        ));
    }
    let num_feature = super::check_feature_count(
        num_feature.min(u64::MAX as f64) as u64,
        "learner.learner_model_param.num_feature",
    )?;
    for key in ["num_class", "num_target"] {
        if let Some(v) = param.get(key) {
            let n = string_number(param, key, "learner.learner_model_param")?;
            if n > 1.0 {
                return Err(format!(
                    "learner.learner_model_param.{key} is {v}; rankd imports single-output \
                     models (one score per document)"
                ));
            }
        }
    }
    let objective = field(learner, "objective", "learner")?
        .get("name")
        .and_then(Value::as_str)
        .ok_or("learner.objective has no `name`")?
        .to_string();
    let base_score = base_margin(param, &objective)?;
    let feature_names: Vec<String> = match learner.get("feature_names") {
        Some(Value::Array(names)) => names
            .iter()
            .map(|n| n.as_str().map(String::from))
            .collect::<Option<_>>()
            .ok_or("learner.feature_names holds a non-string")?,
        _ => Vec::new(),
    };
    if !feature_names.is_empty() && feature_names.len() != num_feature {
        return Err(format!(
            "learner.feature_names has {} names for num_feature {num_feature}",
            feature_names.len()
        ));
    }
    if let Some(Value::Array(types)) = learner.get("feature_types") {
        if let Some(c) = types.iter().position(|t| t.as_str() == Some("c")) {
            return Err(format!(
                "feature {c} is categorical (feature_types `c`); rankd's trees split numeric \
                 features only"
            ));
        }
    }
    let booster = field(learner, "gradient_booster", "learner")?;
    let name = booster.get("name").and_then(Value::as_str).unwrap_or("");
    if name != "gbtree" {
        return Err(format!(
            "learner.gradient_booster is `{name}`; rankd imports `gbtree` boosters only"
        ));
    }
    let model = field(booster, "model", "learner.gradient_booster")?;
    let trees_json = field(model, "trees", "learner.gradient_booster.model")?
        .as_array()
        .ok_or("learner.gradient_booster.model.trees is not an array")?;
    let trees = trees_json
        .iter()
        .enumerate()
        .map(|(t, tree)| parse_tree(tree, num_feature).map_err(|e| format!("tree {t}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let forest = Forest {
        num_features: num_feature,
        base_score,
        trees,
    };
    forest.validate()?;
    Ok(Imported {
        library: Library::Xgboost,
        objective: Some(objective),
        feature_names: (!feature_names.is_empty()).then_some(feature_names),
        forest,
    })
}

fn field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a Value, String> {
    v.get(key).ok_or_else(|| {
        if at.is_empty() {
            format!("no `{key}`: not an XGBoost JSON model")
        } else {
            format!("{at} has no `{key}`")
        }
    })
}

/// XGBoost writes parameters as strings (`"5"`, `"5E-1"`, and in 3.x vectors `"[5E-1]"`).
fn string_number(v: &Value, key: &str, at: &str) -> Result<f64, String> {
    let text = field(v, key, at)?
        .as_str()
        .ok_or_else(|| format!("{at}.{key} is not a string"))?;
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    let parts: Vec<&str> = inner.split(',').collect();
    if parts.len() != 1 {
        return Err(format!(
            "{at}.{key} is `{text}`: one value per model expected (single-output models only)"
        ));
    }
    parts[0]
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("{at}.{key} is `{text}`, not a number"))
}

/// `link(base_score)`: the base score in margin space.
fn base_margin(param: &Value, objective: &str) -> Result<f64, String> {
    let base = string_number(param, "base_score", "learner.learner_model_param")?;
    let margin = match objective {
        o if o.starts_with("rank:") => base,
        "reg:squarederror"
        | "reg:squaredlogerror"
        | "reg:pseudohubererror"
        | "reg:absoluteerror"
        | "reg:quantileerror"
        | "binary:logitraw" => base,
        "binary:logistic" | "reg:logistic" => (base / (1.0 - base)).ln(),
        "count:poisson" | "reg:gamma" | "reg:tweedie" => base.ln(),
        other => {
            return Err(format!(
                "objective `{other}`: rankd does not know how it maps base_score {base} to a \
                 margin"
            ))
        }
    };
    if !margin.is_finite() {
        return Err(format!(
            "base_score {base} gives margin {margin} under objective `{objective}`"
        ));
    }
    Ok(margin)
}

fn array<'a>(tree: &'a Value, key: &str) -> Result<&'a Vec<Value>, String> {
    tree.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no array `{key}`"))
}

fn parse_tree(tree: &Value, num_feature: usize) -> Result<Tree, String> {
    if let Some(param) = tree.get("tree_param") {
        if let Some(size) = param.get("size_leaf_vector") {
            let n = string_number(param, "size_leaf_vector", "tree_param")?;
            if n > 1.0 {
                return Err(format!(
                    "size_leaf_vector is {size}: vector leaves (multi-output trees) are not \
                     supported"
                ));
            }
        }
    }
    let left = array(tree, "left_children")?;
    let right = array(tree, "right_children")?;
    let cond = array(tree, "split_conditions")?;
    let index = array(tree, "split_indices")?;
    let default_left = array(tree, "default_left")?;
    let split_type = tree.get("split_type").and_then(Value::as_array);
    // Node covers for TreeSHAP (XGBoost's own `pred_contribs` weighs by the hessian sum).
    let hessian = tree.get("sum_hessian").and_then(Value::as_array);
    let n = left.len();
    for (key, a) in [
        ("right_children", right),
        ("split_conditions", cond),
        ("split_indices", index),
        ("default_left", default_left),
    ] {
        if a.len() != n {
            return Err(format!(
                "`{key}` has {} entries but `left_children` has {n}",
                a.len()
            ));
        }
    }
    if n == 0 {
        return Err("no nodes".into());
    }
    let int = |a: &Vec<Value>, i: usize, key: &str| {
        a[i].as_i64()
            .ok_or_else(|| format!("node {i}: `{key}` is not an integer"))
    };
    // Walk from the root, numbering reachable nodes in visit order.
    let mut nodes: Vec<Node> = Vec::new();
    let mut cover: Vec<f64> = Vec::new();
    let mut stack = vec![(0usize, None::<(usize, bool)>)];
    let mut seen = vec![false; n];
    while let Some((i, parent)) = stack.pop() {
        if seen[i] {
            return Err(format!("node {i} is reached twice (the tree has a cycle)"));
        }
        seen[i] = true;
        let me = nodes.len() as u32;
        if let Some((p, is_left)) = parent {
            if let Node::Split { left, right, .. } = &mut nodes[p] {
                *(if is_left { left } else { right }) = me;
            }
        }
        if let Some(h) = hessian {
            cover.push(
                h.get(i)
                    .and_then(Value::as_f64)
                    .ok_or_else(|| format!("node {i}: `sum_hessian` holds no number"))?,
            );
        }
        let l = int(left, i, "left_children")?;
        let value = cond[i]
            .as_f64()
            .ok_or_else(|| format!("node {i}: split_conditions holds a non-number"))?;
        if l == -1 {
            nodes.push(Node::Leaf {
                value: f64::from(value as f32),
            });
            continue;
        }
        if let Some(types) = split_type {
            if types.get(i).and_then(Value::as_i64).unwrap_or(0) != 0 {
                return Err(format!(
                    "node {i} is a categorical split; rankd's trees split numeric features only"
                ));
            }
        }
        let r = int(right, i, "right_children")?;
        let f = int(index, i, "split_indices")?;
        for c in [l, r] {
            if c < 0 || c as usize >= n {
                return Err(format!(
                    "node {i} has child {c}, but the tree has {n} nodes"
                ));
            }
        }
        if f < 0 || f as usize >= num_feature {
            return Err(format!(
                "node {i} splits on feature {f}, but the model has {num_feature}"
            ));
        }
        let t = value as f32;
        let threshold = f32_below(t).ok_or_else(|| {
            format!("node {i} splits at −∞ (x < −∞ sends every value right); not supported")
        })?;
        if t.is_nan() {
            return Err(format!("node {i} has a NaN threshold"));
        }
        let dl = int(default_left, i, "default_left")? != 0;
        nodes.push(Node::Split {
            feature: f as u32,
            threshold,
            nan_left: dl,
            zero_missing: false,
            left: 0,
            right: 0,
        });
        let p = me as usize;
        stack.push((r as usize, Some((p, false))));
        stack.push((l as usize, Some((p, true))));
    }
    // A file without real covers (all zero, as rankd writes for trees that have none).
    if cover.iter().all(|&c| c == 0.0) {
        cover.clear();
    }
    Ok(Tree { nodes, cover })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two trees by hand in XGBoost 3.x's layout; tree 1 has a deleted (unreachable) node 3.
    fn model(objective: &str, base: &str) -> String {
        format!(
            r#"{{"learner":{{"attributes":{{}},"feature_names":["bm25","pagerank"],
            "feature_types":["float","float"],
            "gradient_booster":{{"model":{{"gbtree_model_param":{{"num_parallel_tree":"1",
            "num_trees":"2"}},"iteration_indptr":[0,1,2],"tree_info":[0,0],"trees":[
            {{"default_left":[1,0,0],"left_children":[1,-1,-1],"right_children":[2,-1,-1],
              "split_conditions":[0.5,-1.0,1.0],"split_indices":[0,0,0],
              "split_type":[0,0,0],"tree_param":{{"num_nodes":"3","size_leaf_vector":"1"}}}},
            {{"default_left":[0,0,0,0],"left_children":[1,-1,-1,-1],
              "right_children":[2,-1,-1,-1],"split_conditions":[0.25,0.5,2.0,9.0],
              "split_indices":[1,0,0,0],"split_type":[0,0,0,0],
              "tree_param":{{"num_nodes":"4","size_leaf_vector":"1"}}}}]}},
            "name":"gbtree"}},"learner_model_param":{{"base_score":"{base}",
            "num_class":"0","num_feature":"2","num_target":"1"}},
            "objective":{{"name":"{objective}"}}}},"version":[3,2,0]}}"#
        )
    }

    #[test]
    fn hand_model_scores_as_xgboost_decides() {
        let m = parse(model("rank:ndcg", "[5E-1]").as_bytes()).unwrap();
        assert_eq!(m.forest.base_score, 0.5);
        assert_eq!(
            m.forest.trees[1].nodes.len(),
            3,
            "the deleted node is dropped"
        );
        let below = 0.5f32.next_down();
        // XGBoost: x < 0.5 left; 0.5 itself goes right; NaN in tree 0 goes left.
        let cases = [
            ([below, 0.0], 0.5 - 1.0 + 0.5),
            ([0.5, 0.25], 0.5 + 1.0 + 2.0),
            ([f32::NAN, f32::NAN], 0.5 - 1.0 + 2.0),
            ([0.0, 0.2499], 0.5 - 1.0 + 0.5),
        ];
        for (row, want) in cases {
            assert_eq!(m.forest.predict_row(&row), want, "{row:?}");
        }
        let logistic = parse(model("binary:logistic", "7.5E-1").as_bytes()).unwrap();
        assert!((logistic.forest.base_score - 3f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn refusals_are_clear() {
        let err = |s: String| parse(s.as_bytes()).unwrap_err();
        assert!(err(model("multi:softprob", "5E-1")).contains("multi:softprob"));
        let cat = model("rank:ndcg", "5E-1").replacen(
            "\"split_type\":[0,0,0]",
            "\"split_type\":[1,0,0]",
            1,
        );
        assert!(err(cat).contains("tree 0: node 0 is a categorical split"));
        let dart = model("rank:ndcg", "5E-1").replace("\"name\":\"gbtree\"", "\"name\":\"dart\"");
        assert!(err(dart).contains("`dart`"));
        let far = model("rank:ndcg", "5E-1").replacen(
            "\"split_indices\":[0,0,0]",
            "\"split_indices\":[7,0,0]",
            1,
        );
        assert!(err(far).contains("splits on feature 7"));
        let cycle = model("rank:ndcg", "5E-1").replacen(
            "\"left_children\":[1,-1,-1]",
            "\"left_children\":[0,-1,-1]",
            1,
        );
        assert!(err(cycle).contains("reached twice"));
        assert!(err("{}".into()).contains("not an XGBoost JSON model"));
        let vector = model("rank:ndcg", "5E-1").replacen(
            "\"size_leaf_vector\":\"1\"",
            "\"size_leaf_vector\":\"3\"",
            1,
        );
        assert!(err(vector).contains("vector leaves"));
    }
}
