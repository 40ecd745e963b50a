//! The tree ensemble as rankd stores, imports, exports and trains it (SPEC §3.6):
//! `f(x) = base_score + Σ_t T_t(x)`, shrinkage already folded into the leaf values.
//!
//! One split form for every source: a node sends a row **left iff `x_f ≤ threshold`**, with
//! `x_f` and `threshold` both `f32`, and a NaN `x_f` (a missing value) to the side
//! `nan_left` names. The importers convert each library's own test into this form without
//! changing a single decision (XGBoost's `x < t` becomes `x ≤` the largest `f32` below `t`;
//! LightGBM's `f64` threshold becomes the largest `f32` not above it, which an `f32` value
//! compares with in exactly the same way; see [`super::import`]). One LightGBM rule has no
//! threshold form and is kept as a flag: with its missing type `Zero`, a value within
//! [`ZERO_BAND`] of zero is missing too (`zero_missing`). Leaf values are `f64` (LightGBM
//! writes doubles) and scores are summed in `f64`.
//!
//! [`Forest::validate`] is what makes a file safe to compile into the fast scorer: split
//! features inside the feature list, finite leaf values and thresholds, every tree a tree
//! (each node but the root has exactly one parent, all nodes reachable: no cycles, no
//! shared or orphaned nodes), and the size limits below, which keep a model a request can
//! upload within what serving can hold and walk: at most [`MAX_TREES`] trees,
//! [`MAX_FOREST_NODES`] nodes in all, trees at most [`MAX_TREE_DEPTH`] deep, and scores that
//! stay finite in `f32` whatever the row (`|base score| + Σ_t max |leaf_t| ≤ f32::MAX`). [`Forest::predict_row`] is the plain reference evaluator, the
//! oracle of [`super::compiled`]'s tests.

use serde::{Deserialize, Serialize};

/// LightGBM's `kZeroThreshold` (`1e-35f`): with `zero_missing`, a value `x` with
/// `|x| ≤ ZERO_BAND` (zeros of either sign included) is treated as missing.
pub(crate) const ZERO_BAND: f32 = 1e-35;

/// Whether a split sends value `x` left: `x ≤ threshold`, or `nan_left` for a missing value
/// (NaN, and with `zero_missing` any `|x| ≤ ZERO_BAND`). Every walk of a tree decides here.
pub(crate) fn goes_left(x: f32, threshold: f32, nan_left: bool, zero_missing: bool) -> bool {
    let missing = x.is_nan() || (zero_missing && x.abs() <= ZERO_BAND);
    if missing {
        nan_left
    } else {
        x <= threshold
    }
}

/// The most trees a forest may have: twice what rankd's trainer may grow (`trees` ≤ 10 000).
/// Every tree costs every search a walk, however small it is.
pub const MAX_TREES: usize = 20_000;

/// The most nodes a forest may have in all its trees (2²²: 1 000 trees of 2 048 leaves
/// twice over). The serving form takes 16 bytes a node, the stored file about 100.
pub const MAX_FOREST_NODES: usize = 1 << 22;

/// The deepest a tree may be, in splits. Trees grown leaf-wise by LightGBM or rankd with
/// their default 31 leaves are at most 30 deep; a chain this deep is no model anyone
/// trained. Nothing walks a tree recursively, but explaining a score (TreeSHAP) keeps a
/// path per pending node, which this bounds.
pub const MAX_TREE_DEPTH: usize = 2_048;

/// One node of a tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Node {
    /// Left iff `x[feature] ≤ threshold`; a missing value goes left iff `nan_left`. Missing
    /// is NaN, and with `zero_missing` also any `|x| ≤ ZERO_BAND`.
    Split {
        feature: u32,
        threshold: f32,
        nan_left: bool,
        zero_missing: bool,
        left: u32,
        right: u32,
    },
    Leaf {
        value: f64,
    },
}

/// Where a row goes at a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub feature: usize,
    /// The child the row goes to.
    pub taken: usize,
    /// The other child.
    pub other: usize,
}

impl Node {
    /// A leaf's value (0 for a split, which has none).
    pub fn leaf_value(&self) -> f64 {
        match *self {
            Node::Leaf { value } => value,
            Node::Split { .. } => 0.0,
        }
    }

    /// The split's feature and children as `row` meets them ([`goes_left`]); `None` at a leaf.
    pub fn route(&self, row: &[f32]) -> Option<Route> {
        self.route_by(|f| row[f])
    }

    /// [`Node::route`] for a row whose feature `f` is `value(f)`.
    pub fn route_by(&self, value: impl Fn(usize) -> f32) -> Option<Route> {
        match *self {
            Node::Leaf { .. } => None,
            Node::Split {
                feature,
                threshold,
                nan_left,
                zero_missing,
                left,
                right,
            } => {
                let feature = feature as usize;
                let (taken, other) = if goes_left(value(feature), threshold, nan_left, zero_missing)
                {
                    (left, right)
                } else {
                    (right, left)
                };
                Some(Route {
                    feature,
                    taken: taken as usize,
                    other: other as usize,
                })
            }
        }
    }
}

/// A regression tree; node 0 is the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "TreeArrays", try_from = "TreeArrays")]
pub struct Tree {
    pub nodes: Vec<Node>,
    /// Each node's cover: how much training data reached it (rows for rankd's trainer and
    /// LightGBM, the hessian sum for XGBoost), which path-dependent TreeSHAP weighs the
    /// branches by ([`super::shap`]). Empty when the source has none (RankLib).
    pub cover: Vec<f64>,
}

/// An ensemble of regression trees over `num_features` input columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forest {
    pub num_features: usize,
    /// Added to every score (XGBoost's base margin; 0 for LightGBM and RankLib models).
    pub base_score: f64,
    pub trees: Vec<Tree>,
}

impl Tree {
    /// A tree of one leaf.
    pub fn leaf(value: f64) -> Tree {
        Tree {
            nodes: vec![Node::Leaf { value }],
            cover: Vec::new(),
        }
    }

    /// A tree without covers.
    pub fn new(nodes: Vec<Node>) -> Tree {
        Tree {
            nodes,
            cover: Vec::new(),
        }
    }

    /// The leaf value a row reaches (the reference walk: one comparison per node).
    pub fn predict_row(&self, row: &[f32]) -> f64 {
        self.predict_by(|f| row[f])
    }

    /// The leaf value reached by a row whose feature `f` is `value(f)`: a row's slice, or a
    /// column-major matrix while training (`train::add_tree`).
    pub fn predict_by(&self, value: impl Fn(usize) -> f32) -> f64 {
        let mut i = 0usize;
        while let Some(route) = self.nodes[i].route_by(&value) {
            i = route.taken;
        }
        self.nodes[i].leaf_value()
    }

    /// Number of leaves.
    pub fn num_leaves(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n, Node::Leaf { .. }))
            .count()
    }

    /// The longest root-to-leaf path, in splits (0 for a single leaf). Assumes a valid tree.
    pub fn depth(&self) -> usize {
        let mut deepest = 0;
        let mut stack = vec![(0usize, 0usize)];
        while let Some((i, d)) = stack.pop() {
            match self.nodes[i] {
                Node::Leaf { .. } => deepest = deepest.max(d),
                Node::Split { left, right, .. } => {
                    stack.push((left as usize, d + 1));
                    stack.push((right as usize, d + 1));
                }
            }
        }
        deepest
    }

    /// Checks the structure and numbers of one tree (see the module doc); the error says
    /// which node is wrong.
    pub fn validate(&self, num_features: usize) -> Result<(), String> {
        let n = self.nodes.len();
        if n == 0 {
            return Err("has no nodes".into());
        }
        if n > u32::MAX as usize {
            return Err(format!("has {n} nodes"));
        }
        let mut parent: Vec<Option<usize>> = vec![None; n];
        for (i, node) in self.nodes.iter().enumerate() {
            match *node {
                Node::Leaf { value } if !value.is_finite() => {
                    return Err(format!("leaf {i} has value {value}"));
                }
                Node::Leaf { .. } => {}
                Node::Split {
                    feature,
                    threshold,
                    left,
                    right,
                    ..
                } => {
                    if feature as usize >= num_features {
                        return Err(format!(
                            "node {i} splits on feature index {feature}, but the model has \
                             {num_features} features"
                        ));
                    }
                    if !threshold.is_finite() {
                        // JSON has no infinity: the model file could not be read back.
                        return Err(format!("node {i} has threshold {threshold}"));
                    }
                    for child in [left, right] {
                        let c = child as usize;
                        if c >= n {
                            return Err(format!(
                                "node {i} has child {child}, but the tree has {n} nodes"
                            ));
                        }
                        if c == 0 {
                            return Err(format!(
                                "node {i} has the root as a child (a cycle through the root)"
                            ));
                        }
                        if let Some(p) = parent[c] {
                            return Err(format!(
                                "node {c} is a child of both node {p} and node {i} (a tree \
                                 node has one parent)"
                            ));
                        }
                        parent[c] = Some(i);
                    }
                }
            }
        }
        // One parent per non-root node and n − 1 edges: the nodes reachable from the root
        // form a tree; any node not reached sits on a cycle or is orphaned.
        let mut reached = vec![false; n];
        let mut stack = vec![0usize];
        while let Some(i) = stack.pop() {
            reached[i] = true;
            if let Node::Split { left, right, .. } = self.nodes[i] {
                stack.push(left as usize);
                stack.push(right as usize);
            }
        }
        if let Some(i) = reached.iter().position(|r| !r) {
            return Err(format!(
                "node {i} is not reachable from the root (orphaned, or on a cycle)"
            ));
        }
        let depth = self.depth();
        if depth > MAX_TREE_DEPTH {
            return Err(format!(
                "is {depth} splits deep; at most {MAX_TREE_DEPTH} are supported"
            ));
        }
        if !self.cover.is_empty() {
            if self.cover.len() != n {
                return Err(format!("has {} covers for {n} nodes", self.cover.len()));
            }
            if let Some((i, c)) = self
                .cover
                .iter()
                .enumerate()
                .find(|(_, c)| !c.is_finite() || **c < 0.0)
            {
                return Err(format!("node {i} has cover {c}"));
            }
            if let Some(i) = (0..n)
                .find(|&i| matches!(self.nodes[i], Node::Split { .. }) && self.cover[i] <= 0.0)
            {
                return Err(format!("split node {i} has cover 0: no data reached it"));
            }
        }
        Ok(())
    }
}

impl Forest {
    /// Checks every tree (see the module doc) against `num_features`.
    pub fn validate(&self) -> Result<(), String> {
        if !self.base_score.is_finite() {
            return Err(format!("base score is {}", self.base_score));
        }
        if self.num_features == 0 {
            return Err("the forest has no input features".into());
        }
        if self.trees.len() > MAX_TREES {
            return Err(format!(
                "the forest has {} trees; at most {MAX_TREES} are supported",
                self.trees.len()
            ));
        }
        let nodes: usize = self.trees.iter().map(|t| t.nodes.len()).sum();
        if nodes > MAX_FOREST_NODES {
            return Err(format!(
                "the forest has {nodes} nodes; at most {MAX_FOREST_NODES} are supported"
            ));
        }
        for (t, tree) in self.trees.iter().enumerate() {
            tree.validate(self.num_features)
                .map_err(|e| format!("tree {t}: {e}"))?;
        }
        // The largest score any row can reach, in f64: it must be an f32 score.
        let bound = self.base_score.abs()
            + self
                .trees
                .iter()
                .map(|t| {
                    t.nodes
                        .iter()
                        .map(|n| n.leaf_value().abs())
                        .fold(0.0, f64::max)
                })
                .sum::<f64>();
        if bound > f64::from(f32::MAX) {
            return Err(format!(
                "scores could reach {bound:e} (the base score plus every tree's largest \
                 leaf); a score must stay below {:e}",
                f32::MAX
            ));
        }
        Ok(())
    }

    /// The reference score of one row (`num_features` values): base score plus every
    /// tree's leaf, summed in `f64` in tree order.
    pub fn predict_row(&self, row: &[f32]) -> f64 {
        self.trees
            .iter()
            .fold(self.base_score, |s, t| s + t.predict_row(row))
    }

    /// Which features the splits use, in index order.
    pub fn used_features(&self) -> Vec<usize> {
        let mut used = vec![false; self.num_features];
        for tree in &self.trees {
            for node in &tree.nodes {
                if let Node::Split { feature, .. } = node {
                    used[*feature as usize] = true;
                }
            }
        }
        (0..self.num_features).filter(|&f| used[f]).collect()
    }

    /// The same forest over another feature numbering: split feature `f` becomes `map[f]`.
    pub fn remap_features(&mut self, map: &[usize], num_features: usize) {
        for tree in &mut self.trees {
            for node in &mut tree.nodes {
                if let Node::Split { feature, .. } = node {
                    *feature = map[*feature as usize] as u32;
                }
            }
        }
        self.num_features = num_features;
    }
}

/// A tree in a model file: one array per node field (XGBoost's layout), compact and easy to
/// read. `feature` is −1 for a leaf; a leaf's `threshold`, `nan_left`, `left` and `right`
/// are 0 and a split's `value` is 0. `zero_missing` is left out when no node sets it.
#[derive(Serialize, Deserialize)]
struct TreeArrays {
    feature: Vec<i64>,
    threshold: Vec<f32>,
    nan_left: Vec<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    zero_missing: Vec<bool>,
    left: Vec<u32>,
    right: Vec<u32>,
    value: Vec<f64>,
    /// Node covers; left out when the tree has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    cover: Vec<f64>,
}

impl From<Tree> for TreeArrays {
    fn from(tree: Tree) -> Self {
        let n = tree.nodes.len();
        let mut a = TreeArrays {
            feature: Vec::with_capacity(n),
            threshold: Vec::with_capacity(n),
            nan_left: Vec::with_capacity(n),
            zero_missing: Vec::with_capacity(n),
            left: Vec::with_capacity(n),
            right: Vec::with_capacity(n),
            value: Vec::with_capacity(n),
            cover: tree.cover,
        };
        for node in tree.nodes {
            let (f, t, nl, zm, l, r, v) = match node {
                Node::Split {
                    feature,
                    threshold,
                    nan_left,
                    zero_missing,
                    left,
                    right,
                } => (
                    i64::from(feature),
                    threshold,
                    nan_left,
                    zero_missing,
                    left,
                    right,
                    0.0,
                ),
                Node::Leaf { value } => (-1, 0.0, false, false, 0, 0, value),
            };
            a.feature.push(f);
            a.threshold.push(t);
            a.nan_left.push(nl);
            a.zero_missing.push(zm);
            a.left.push(l);
            a.right.push(r);
            a.value.push(v);
        }
        if !a.zero_missing.iter().any(|&z| z) {
            a.zero_missing.clear();
        }
        a
    }
}

impl TryFrom<TreeArrays> for Tree {
    type Error = String;

    fn try_from(a: TreeArrays) -> Result<Self, String> {
        let n = a.feature.len();
        let zero_missing = if a.zero_missing.is_empty() {
            vec![false; n]
        } else {
            a.zero_missing
        };
        for (name, len) in [
            ("zero_missing", zero_missing.len()),
            ("threshold", a.threshold.len()),
            ("nan_left", a.nan_left.len()),
            ("left", a.left.len()),
            ("right", a.right.len()),
            ("value", a.value.len()),
            ("cover", if a.cover.is_empty() { n } else { a.cover.len() }),
        ] {
            if len != n {
                return Err(format!(
                    "tree arrays differ in length: `feature` has {n} entries, `{name}` {len}"
                ));
            }
        }
        let nodes = (0..n)
            .map(|i| match a.feature[i] {
                -1 => Ok(Node::Leaf { value: a.value[i] }),
                f if (0..=i64::from(u32::MAX)).contains(&f) => Ok(Node::Split {
                    feature: f as u32,
                    threshold: a.threshold[i],
                    nan_left: a.nan_left[i],
                    zero_missing: zero_missing[i],
                    left: a.left[i],
                    right: a.right[i],
                }),
                f => Err(format!("node {i} has feature {f}")),
            })
            .collect::<Result<_, _>>()?;
        Ok(Tree {
            nodes,
            cover: a.cover,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::testutil::{leaf, small_tree, split};

    #[test]
    fn reference_walk_by_hand() {
        let t = small_tree();
        assert_eq!(
            t.predict_row(&[0.5, -1.0]),
            1.0,
            "equal to the threshold goes left"
        );
        assert_eq!(t.predict_row(&[0.5, -0.999]), 2.0);
        assert_eq!(t.predict_row(&[0.6, -5.0]), 3.0);
        assert_eq!(
            t.predict_row(&[f32::NAN, -5.0]),
            3.0,
            "NaN in x0 goes right"
        );
        assert_eq!(t.predict_row(&[0.0, f32::NAN]), 1.0, "NaN in x1 goes left");
        // With zero as missing, ±0 and values within 1e-35 take the missing side.
        let mut z = t.clone();
        z.nodes[0] = Node::Split {
            feature: 0,
            threshold: 0.5,
            nan_left: false,
            zero_missing: true,
            left: 1,
            right: 2,
        };
        assert_eq!(z.predict_row(&[-0.0, -5.0]), 3.0);
        assert_eq!(z.predict_row(&[1e-35, -5.0]), 3.0);
        assert_eq!(
            z.predict_row(&[1.1e-35, -5.0]),
            1.0,
            "just outside the band"
        );
        assert_eq!(z.predict_row(&[-1e-36, -5.0]), 3.0);
        assert_eq!(t.depth(), 2);
        assert_eq!(t.num_leaves(), 3);
        let f = Forest {
            num_features: 2,
            base_score: 0.25,
            trees: vec![t.clone(), t],
        };
        assert_eq!(f.predict_row(&[0.0, 0.0]), 4.25);
        assert_eq!(f.used_features(), [0, 1]);
    }

    #[test]
    fn broken_trees_are_named() {
        let err = |nodes: Vec<Node>| Tree::new(nodes).validate(2).unwrap_err();
        assert_eq!(err(vec![]), "has no nodes");
        assert!(err(vec![split(2, 0.0, false, 1, 2), leaf(0.0), leaf(0.0)])
            .contains("feature index 2, but the model has 2 features"));
        assert!(err(vec![split(0, 0.0, false, 1, 3), leaf(0.0), leaf(0.0)])
            .contains("child 3, but the tree has 3 nodes"));
        assert!(
            err(vec![split(0, f32::NAN, false, 1, 2), leaf(0.0), leaf(0.0)])
                .contains("node 0 has threshold NaN")
        );
        assert!(err(vec![
            split(0, 0.0, false, 1, 2),
            leaf(f64::INFINITY),
            leaf(0.0)
        ])
        .contains("leaf 1 has value inf"));
        // A cycle back to the root, a cycle below it, a shared child, an orphan.
        assert!(err(vec![split(0, 0.0, false, 1, 0), leaf(0.0)]).contains("cycle"));
        let cycle = vec![
            split(0, 0.0, false, 1, 2),
            leaf(0.0),
            leaf(0.0),
            split(1, 0.0, false, 4, 3),
            leaf(0.0),
        ];
        assert!(err(cycle).contains("node 3 is not reachable from the root"));
        let loop_pair = vec![
            split(0, 0.0, false, 1, 2),
            leaf(0.0),
            leaf(0.0),
            split(1, 0.0, false, 4, 5),
            split(1, 0.0, false, 3, 6),
            leaf(0.0),
            leaf(0.0),
        ];
        assert!(err(loop_pair).contains("node 3 is not reachable from the root"));
        assert!(err(vec![split(0, 0.0, false, 1, 1), leaf(0.0)])
            .contains("node 1 is a child of both node 0 and node 0"));
        assert!(err(vec![leaf(0.0), leaf(1.0)]).contains("node 1 is not reachable"));
        assert!(small_tree().validate(2).is_ok());
        let f = Forest {
            num_features: 2,
            base_score: f64::NAN,
            trees: vec![],
        };
        assert!(f.validate().unwrap_err().contains("base score"));
    }

    /// Issue 30, N7–N9: what an upload could size or make non-finite is refused, named.
    #[test]
    fn size_limits_and_non_finite_scores_are_refused() {
        use crate::rerank::testutil::chain_tree;
        let forest = |trees: Vec<Tree>| Forest {
            num_features: 2,
            base_score: 0.0,
            trees,
        };
        // An infinite threshold has no JSON form: the stored file would never load.
        for t in [f32::INFINITY, f32::NEG_INFINITY] {
            let e = Tree::new(vec![split(0, t, false, 1, 2), leaf(0.0), leaf(0.0)])
                .validate(2)
                .unwrap_err();
            assert!(e.contains("node 0 has threshold"), "{e}");
        }
        assert!(chain_tree(MAX_TREE_DEPTH, 2).validate(2).is_ok());
        let e = chain_tree(MAX_TREE_DEPTH + 1, 2).validate(2).unwrap_err();
        assert!(e.contains("2049 splits deep; at most 2048"), "{e}");
        let e = forest(vec![Tree::leaf(0.0); MAX_TREES + 1])
            .validate()
            .unwrap_err();
        assert!(e.contains("20001 trees; at most 20000"), "{e}");
        let big = chain_tree(2_000, 2); // 4 001 nodes
        let e = forest(vec![big; MAX_FOREST_NODES / 4_001 + 1])
            .validate()
            .unwrap_err();
        assert!(e.contains("nodes; at most 4194304"), "{e}");
        // Each leaf is finite, their sum is not an f32 (every score would be null).
        let huge = f64::from(f32::MAX) * 0.75;
        let e = forest(vec![Tree::leaf(huge), Tree::leaf(-huge)])
            .validate()
            .unwrap_err();
        assert!(e.contains("scores could reach"), "{e}");
        assert!(forest(vec![Tree::leaf(huge)]).validate().is_ok());
        let mut with_base = forest(vec![Tree::leaf(huge)]);
        with_base.base_score = huge;
        assert!(with_base.validate().is_err());
    }

    #[test]
    fn file_layout_round_trips() {
        let f = Forest {
            num_features: 2,
            base_score: 0.5,
            trees: vec![small_tree(), Tree::leaf(-0.125)],
        };
        let json = serde_json::to_string(&f).unwrap();
        assert!(json.contains("\"feature\":[0,1,-1,-1,-1]"), "{json}");
        assert!(!json.contains("zero_missing"), "{json}");
        let back: Forest = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);
        let mut z = f.clone();
        if let Node::Split { zero_missing, .. } = &mut z.trees[0].nodes[1] {
            *zero_missing = true;
        }
        let json_z = serde_json::to_string(&z).unwrap();
        assert!(json_z.contains("\"zero_missing\":[false,true,false,false,false]"));
        assert_eq!(serde_json::from_str::<Forest>(&json_z).unwrap(), z);
        let bad = json.replacen("\"value\":[0.0,0.0,3.0,1.0,2.0]", "\"value\":[0.0]", 1);
        let e = serde_json::from_str::<Forest>(&bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`value` 1"), "{e}");
    }
}
