//! LightGBM's text model, version v4 (`Booster.save_model`, LightGBM ≥ 4.0), as
//! `include/LightGBM/tree.h` evaluates it (`NumericalDecision`):
//!
//! - a node sends `x` left iff `x ≤ threshold`, compared as `f64`;
//! - `decision_type` bit 0 = categorical (refused), bit 1 = default left, bits 2–3 = the
//!   missing type: **None** (a NaN is replaced by 0.0 and compared), **Zero** (a NaN, or any
//!   `|x| ≤ 1e-35`, takes the default side), **NaN** (a NaN takes the default side);
//! - child `c ≥ 0` is internal node `c`, `c < 0` is leaf `−c − 1` (`~c`);
//! - the score is the sum of the leaf values, which already include the shrinkage (the
//!   `shrinkage=` line is informational).

use super::{f32_at_or_below, Imported, Library};
use crate::rerank::gbdt::forest::{Forest, Node, Tree};

const CATEGORICAL: u32 = 1;
const DEFAULT_LEFT: u32 = 2;
const MISSING_NONE: u32 = 0;
const MISSING_ZERO: u32 = 1;
const MISSING_NAN: u32 = 2;

/// Parses a LightGBM text model; errors name the line and, inside a tree, the tree and node.
pub fn parse(text: &str) -> Result<Imported, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut header = std::collections::HashMap::new();
    let mut i = 0;
    while i < lines.len() && !lines[i].starts_with("Tree=") {
        let line = lines[i].trim();
        if line == "average_output" {
            return Err(format!(
                "line {}: `average_output` (random-forest mode averages the trees); rankd \
                 imports boosted models, whose trees are summed",
                i + 1
            ));
        }
        if line == "end of trees" {
            break;
        }
        if let Some((k, v)) = line.split_once('=') {
            header.insert(k, (i + 1, v));
        } else if i == 0 && line != "tree" {
            return Err(format!(
                "line 1 is `{line}`, expected `tree`: not a LightGBM text model"
            ));
        }
        i += 1;
    }
    let get = |key: &str| {
        header
            .get(key)
            .copied()
            .ok_or_else(|| format!("the header has no `{key}=` line"))
    };
    let (line, version) = get("version")?;
    if version != "v4" {
        return Err(format!(
            "line {line}: model version `{version}`; rankd reads LightGBM's v4 text format \
             (LightGBM 4.x)"
        ));
    }
    for key in ["num_class", "num_tree_per_iteration"] {
        let (line, v) = get(key)?;
        if v != "1" {
            return Err(format!(
                "line {line}: {key}={v}; rankd imports single-output models (one score per \
                 document)"
            ));
        }
    }
    let (line, max_idx) = get("max_feature_idx")?;
    let max_idx = max_idx
        .parse::<u64>()
        .map_err(|_| format!("line {line}: max_feature_idx `{max_idx}` is not a number"))?;
    let num_features = super::check_feature_count(max_idx, "max_feature_idx")
        .map_err(|e| format!("line {line}: {e}"))?
        + 1;
    let feature_names = match header.get("feature_names") {
        None => None,
        Some(&(line, v)) => {
            let names: Vec<String> = v.split(' ').map(String::from).collect();
            if names.len() != num_features {
                return Err(format!(
                    "line {line}: {} feature names for {num_features} features",
                    names.len()
                ));
            }
            let automatic = names
                .iter()
                .enumerate()
                .all(|(c, n)| *n == format!("Column_{c}"));
            (!automatic).then_some(names)
        }
    };
    let objective = header
        .get("objective")
        .map(|&(_, v)| v.split(' ').next().unwrap_or_default().to_string());

    let mut trees = Vec::new();
    while i < lines.len() && lines[i].starts_with("Tree=") {
        let start = i + 1;
        let mut fields = std::collections::HashMap::new();
        i += 1;
        while i < lines.len() {
            let line = lines[i].trim();
            if line.is_empty() || line.starts_with("Tree=") || line == "end of trees" {
                break;
            }
            if let Some((k, v)) = line.split_once('=') {
                fields.insert(k, (i + 1, v));
            }
            i += 1;
        }
        let t = trees.len();
        trees.push(
            parse_tree(&fields, num_features)
                .map_err(|e| format!("tree {t} (line {start}): {e}"))?,
        );
        while i < lines.len() && lines[i].trim().is_empty() {
            i += 1;
        }
    }
    if trees.is_empty() {
        return Err("the model has no `Tree=` block".into());
    }
    let forest = Forest {
        num_features,
        base_score: 0.0,
        trees,
    };
    forest.validate()?;
    Ok(Imported {
        library: Library::Lightgbm,
        objective,
        feature_names,
        forest,
    })
}

type Fields<'a> = std::collections::HashMap<&'a str, (usize, &'a str)>;

fn numbers<T: std::str::FromStr>(fields: &Fields, key: &str, len: usize) -> Result<Vec<T>, String> {
    let &(line, v) = fields.get(key).ok_or_else(|| format!("no `{key}=` line"))?;
    let values: Vec<T> = v
        .split_whitespace()
        .map(|s| {
            s.parse::<T>()
                .map_err(|_| format!("line {line}: `{key}` has `{s}`, not a number"))
        })
        .collect::<Result<_, _>>()?;
    if values.len() != len {
        return Err(format!(
            "line {line}: `{key}` has {} values, expected {len}",
            values.len()
        ));
    }
    Ok(values)
}

fn parse_tree(fields: &Fields, num_features: usize) -> Result<Tree, String> {
    let leaves: usize = numbers::<usize>(fields, "num_leaves", 1)?[0];
    if leaves == 0 {
        return Err("num_leaves=0".into());
    }
    if let Some(&(line, v)) = fields.get("is_linear") {
        if v != "0" {
            return Err(format!(
                "line {line}: a linear tree (is_linear={v}); rankd's leaves are constants"
            ));
        }
    }
    let leaf_value: Vec<f64> = numbers(fields, "leaf_value", leaves)?;
    if leaves == 1 {
        return Ok(Tree::leaf(leaf_value[0]));
    }
    let internal = leaves - 1;
    let split_feature: Vec<usize> = numbers(fields, "split_feature", internal)?;
    let threshold: Vec<f64> = numbers(fields, "threshold", internal)?;
    let decision_type: Vec<u32> = numbers(fields, "decision_type", internal)?;
    let left_child: Vec<i64> = numbers(fields, "left_child", internal)?;
    let right_child: Vec<i64> = numbers(fields, "right_child", internal)?;
    // Internal node j keeps index j; leaf k becomes node internal + k.
    let child = |c: i64, j: usize, side: &str| -> Result<u32, String> {
        let index = if c >= 0 {
            c as usize
        } else {
            internal + (!c) as usize
        };
        if (c >= 0 && index >= internal) || index >= internal + leaves {
            return Err(format!("node {j}: {side} child {c} is out of range"));
        }
        Ok(index as u32)
    };
    let mut nodes = Vec::with_capacity(internal + leaves);
    for j in 0..internal {
        let dt = decision_type[j];
        if dt & CATEGORICAL != 0 {
            return Err(format!(
                "node {j} is a categorical split (decision_type {dt}); rankd's trees split \
                 numeric features only"
            ));
        }
        if dt & !0b1111 != 0 {
            return Err(format!("node {j}: unknown decision_type bits in {dt}"));
        }
        if split_feature[j] >= num_features {
            return Err(format!(
                "node {j} splits on feature {} of {num_features}",
                split_feature[j]
            ));
        }
        let t = threshold[j];
        if t.is_nan() {
            return Err(format!("node {j} has a NaN threshold"));
        }
        let default_left = dt & DEFAULT_LEFT != 0;
        let (nan_left, zero_missing) = match (dt >> 2) & 3 {
            // A NaN is compared as 0.0.
            MISSING_NONE => (0.0 <= t, false),
            MISSING_ZERO => (default_left, true),
            MISSING_NAN => (default_left, false),
            other => return Err(format!("node {j}: unknown missing type {other}")),
        };
        nodes.push(Node::Split {
            feature: split_feature[j] as u32,
            threshold: f32_at_or_below(t),
            nan_left,
            zero_missing,
            left: child(left_child[j], j, "left")?,
            right: child(right_child[j], j, "right")?,
        });
    }
    nodes.extend(leaf_value.into_iter().map(|value| Node::Leaf { value }));
    // Node covers for TreeSHAP: the training rows that reached each node (what LightGBM's
    // own `pred_contrib` weighs by); absent from hand-written files.
    let cover = match (fields.get("internal_count"), fields.get("leaf_count")) {
        (Some(_), Some(_)) => {
            let mut c: Vec<f64> = numbers(fields, "internal_count", internal)?;
            c.extend(numbers::<f64>(fields, "leaf_count", leaves)?);
            c
        }
        _ => Vec::new(),
    };
    Ok(Tree { nodes, cover })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree by hand: node 0 on feature 0 (Zero missing type, default right), node 1 on
    /// feature 1 (None: NaN compares as 0.0), node 2 on feature 1 (NaN type, default left).
    const MODEL: &str = "tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\n\
        label_index=0\nmax_feature_idx=1\nobjective=lambdarank\nfeature_names=bm25 pagerank\n\
        feature_infos=none none\ntree_sizes=1\n\nTree=0\nnum_leaves=4\nnum_cat=0\n\
        split_feature=0 1 1\nsplit_gain=1 1 1\nthreshold=0.5 -0.25 0.75\n\
        decision_type=4 0 10\nleft_child=1 -1 -3\nright_child=2 -2 -4\n\
        leaf_value=1 2 3 4\nleaf_weight=1 1 1 1\nleaf_count=1 1 1 1\n\
        internal_value=0 0 0\ninternal_weight=0 0 0\ninternal_count=1 1 1\nis_linear=0\n\
        shrinkage=0.1\n\n\nTree=1\nnum_leaves=1\nnum_cat=0\nsplit_feature=\nsplit_gain=\n\
        threshold=\ndecision_type=\nleft_child=\nright_child=\nleaf_value=0.5\nleaf_weight=\n\
        leaf_count=3\ninternal_value=\ninternal_weight=\ninternal_count=\nis_linear=0\n\
        shrinkage=1\n\n\nend of trees\n\nparameters:\n[boosting: gbdt]\nend of parameters\n";

    /// Found by the `model` fuzz target: a feature count no model has is refused before
    /// anything is sized by it (it used to abort the process on a 152 TB allocation).
    #[test]
    fn an_absurd_feature_count_is_refused() {
        let huge = MODEL
            .replace("max_feature_idx=1", "max_feature_idx=9535090019832")
            .replace("feature_names=bm25 pagerank\n", "");
        let err = parse(&huge).unwrap_err();
        assert!(
            err.contains("max_feature_idx 9535090019832 is beyond"),
            "{err}"
        );
        let max = MODEL
            .replace("max_feature_idx=1", "max_feature_idx=18446744073709551615")
            .replace("feature_names=bm25 pagerank\n", "");
        assert!(parse(&max).is_err());
    }

    /// LightGBM's NumericalDecision, written out for the oracle.
    fn lightgbm_decision(x: f32, t: f64, dt: u32) -> bool {
        let missing = (dt >> 2) & 3;
        let mut v = f64::from(x);
        if v.is_nan() && missing != MISSING_NAN {
            v = 0.0;
        }
        if (missing == MISSING_ZERO && (-1e-35f32 as f64..=1e-35f32 as f64).contains(&v))
            || (missing == MISSING_NAN && v.is_nan())
        {
            return dt & DEFAULT_LEFT != 0;
        }
        v <= t
    }

    #[test]
    fn hand_model_scores_as_lightgbm_decides() {
        let m = parse(MODEL).unwrap();
        assert_eq!(m.objective.as_deref(), Some("lambdarank"));
        assert_eq!(
            m.feature_names,
            Some(vec!["bm25".to_string(), "pagerank".to_string()])
        );
        let xs = [
            f32::NAN,
            0.0,
            -0.0,
            1e-35,
            -1e-36,
            2e-35,
            0.5,
            0.50000006,
            -0.25,
            -0.24999999,
            0.75,
            0.7500001,
            -3.0,
        ];
        for &a in &xs {
            for &b in &xs {
                // The tree by hand, through LightGBM's decision rule.
                let want = if lightgbm_decision(a, 0.5, 4) {
                    if lightgbm_decision(b, -0.25, 0) {
                        1.0
                    } else {
                        2.0
                    }
                } else if lightgbm_decision(b, 0.75, 10) {
                    3.0
                } else {
                    4.0
                } + 0.5;
                assert_eq!(m.forest.predict_row(&[a, b]), want, "x = ({a:e}, {b:e})");
            }
        }
    }

    #[test]
    fn refusals_are_clear() {
        let err = |text: String| parse(&text).unwrap_err();
        assert!(err(MODEL.replace("version=v4", "version=v3")).contains("v4 text format"));
        assert!(err(MODEL.replace("num_class=1", "num_class=3")).contains("single-output"));
        let cat = MODEL.replace("decision_type=4 0 10", "decision_type=5 0 10");
        assert!(err(cat).contains("tree 0 (line 12): node 0 is a categorical split"));
        let linear = MODEL.replacen("is_linear=0", "is_linear=1", 1);
        assert!(err(linear).contains("linear tree"));
        let short = MODEL.replace("threshold=0.5 -0.25 0.75", "threshold=0.5 -0.25");
        assert!(err(short).contains("`threshold` has 2 values, expected 3"));
        let bad = MODEL.replace("left_child=1 -1 -3", "left_child=1 -1 -9");
        assert!(err(bad).contains("node 2: left child -9 is out of range"));
        let cycle = MODEL.replace("left_child=1 -1 -3", "left_child=1 -1 0");
        assert!(err(cycle).contains("tree 0"));
        assert!(err("hello\n".into()).contains("not a LightGBM text model"));
        let nan = MODEL.replace("threshold=0.5 -0.25 0.75", "threshold=0.5 nan 0.75");
        assert!(err(nan).contains("NaN threshold"));
        let rf = MODEL.replace("tree_sizes=1\n", "tree_sizes=1\naverage_output\n");
        assert!(err(rf).contains("average_output"));
        // Automatic names are no names: the model binds by position.
        let auto = MODEL.replace(
            "feature_names=bm25 pagerank",
            "feature_names=Column_0 Column_1",
        );
        assert_eq!(parse(&auto).unwrap().feature_names, None);
    }
}
