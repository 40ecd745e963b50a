//! Unbiased LambdaMART (SPEC §11, "Unbiased LambdaMART"; Hu, Wang, Peng, Li 2019,
//! "Unbiased LambdaMART: An Unbiased Pairwise Learning-to-Rank Algorithm"; XGBoost's
//! `lambdarank_unbiased`): trees trained on the logged result lists themselves instead of
//! on labels.
//!
//! A training group with [`ClickLists`] gets its rows' gradients from its lists, not from
//! its labels. Each list is one logged session: the rows in the order they were shown, a
//! click label per row. Within a list, every pair (clicked `i`, unclicked `j`) gets
//! LambdaMART's lambda and hessian (NDCG@truncation of the list, the objective's
//! [`LambdaParams`], |ΔZ| kept as XGBoost keeps it), divided by `t⁺_{k(i)}·t⁻_{k(j)}`, where
//! `k` is the rank the row was shown at; a row's gradient is the sum over every list it
//! appears in. After each round's gradients, the position biases are re-estimated from the
//! round's pair costs `L_ij = |ΔZ|·ln(1 + e^{−σ(s_i − s_j)})` (eq. 30 and 31 of the paper):
//!
//! ```text
//! t⁺_k = ( Σ_{pairs, k(i)=k} L_ij / t⁻_{k(j)}  /  Σ_{pairs, k(i)=1} L_ij / t⁻_{k(j)} )^{1/(p+1)}
//! t⁻_k = ( Σ_{pairs, k(j)=k} L_ij / t⁺_{k(i)}  /  Σ_{pairs, k(j)=1} L_ij / t⁺_{k(i)} )^{1/(p+1)}
//! ```
//!
//! with `p` the regularisation norm ([`ClickLists::bias_norm`], XGBoost's
//! `lambdarank_bias_norm`, 2), both relative to rank 1, both 1 before the first round. A rank
//! whose sum is 0 gets bias 0, and its pairs then go unweighted (as in XGBoost). Why: IPS
//! needs the examination probabilities before training and only corrects clicks; the pairwise
//! estimate learns the bias of clicks (t⁺) and of non-clicks (t⁻) with the model, from the
//! same pairs.
//!
//! XGBoost's cost is `|ΔZ|·ln(1 + e^{s_i − s_j})`, the logistic loss with the pair's order
//! reversed; rankd takes the paper's (the loss of the pair as the clicks order it).

use std::collections::HashMap;

use serde::Serialize;

use super::{PairCosts, QueryNewton};
use crate::rerank::objective::{debiased_lambda_grad_hess, LambdaMetric, LambdaParams, PairDebias};

/// XGBoost's `lambdarank_bias_norm` default: the `p` of the bias update's exponent
/// `1/(p + 1)`.
pub const DEFAULT_BIAS_NORM: f64 = 2.0;

/// One logged result list over a training group's rows.
#[derive(Debug, Clone, PartialEq)]
pub struct ClickList {
    /// Rows of the group (0-based within it), in the order shown: index 0 was rank 1.
    pub rows: Vec<usize>,
    /// 1 if the row at the same index was clicked, else 0.
    pub clicks: Vec<i32>,
}

/// The logged lists of the training groups that learn from them, by the group's qid (so
/// that sets concatenated with judged groups keep them), and the bias update's norm.
#[derive(Debug, Clone, PartialEq)]
pub struct ClickLists {
    pub by_group: HashMap<String, Vec<ClickList>>,
    /// `p` of the bias update (see the module doc).
    pub bias_norm: f64,
}

impl ClickLists {
    /// Ranks the biases are kept for: the longest list.
    pub fn positions(&self) -> usize {
        self.by_group
            .values()
            .flatten()
            .map(|l| l.rows.len())
            .max()
            .unwrap_or(0)
    }
}

/// The learned position biases, by rank (index 0: rank 1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PositionBias {
    /// Bias of a click at each rank, relative to rank 1.
    pub t_plus: Vec<f64>,
    /// Bias of a non-click at each rank, relative to rank 1.
    pub t_minus: Vec<f64>,
}

impl PositionBias {
    /// Every bias 1: the first round's, and plain LambdaMART's.
    pub fn ones(positions: usize) -> Self {
        PositionBias {
            t_plus: vec![1.0; positions],
            t_minus: vec![1.0; positions],
        }
    }

    /// Eq. 30 and 31 (module doc) from one round's summed pair costs by rank.
    pub fn update(&mut self, loss_plus: &[f64], loss_minus: &[f64], bias_norm: f64) {
        let exponent = 1.0 / (1.0 + bias_norm);
        let relative = |t: &mut [f64], loss: &[f64]| {
            if let Some(&first) = loss.first().filter(|&&l| l > f64::EPSILON) {
                for (t, l) in t.iter_mut().zip(loss) {
                    *t = (l / first).powf(exponent);
                }
            }
        };
        relative(&mut self.t_plus, loss_plus);
        relative(&mut self.t_minus, loss_minus);
    }
}

/// The gradients and hessians of a group of `scores.len()` rows from its `lists` (module
/// doc; the loss the mean over the lists that have a pair of `1 − NDCG@truncation`), and the
/// group's pair costs by rank ([`PairDebias`]); `None` when no list has both a click and a
/// row without one.
pub(super) fn lists_grad_hess(
    scores: &[f64],
    lists: &[ClickList],
    p: &LambdaParams,
    bias: &PositionBias,
) -> Option<(QueryNewton, PairCosts)> {
    let positions = bias.t_plus.len();
    let mut out = QueryNewton {
        loss: 0.0,
        grad: vec![0.0; scores.len()],
        hess: vec![0.0; scores.len()],
    };
    let (mut loss_plus, mut loss_minus) = (vec![0.0; positions], vec![0.0; positions]);
    let mut used = 0usize;
    let (mut s, mut g, mut h) = (Vec::new(), Vec::new(), Vec::new());
    for list in lists {
        s.clear();
        s.extend(list.rows.iter().map(|&r| scores[r]));
        g.resize(s.len(), 0.0);
        h.resize(s.len(), 0.0);
        let mut debias = PairDebias {
            t_plus: &bias.t_plus,
            t_minus: &bias.t_minus,
            loss_plus: &mut loss_plus,
            loss_minus: &mut loss_minus,
        };
        let Some(ndcg) = debiased_lambda_grad_hess(
            &s,
            &list.clicks,
            LambdaMetric::Ndcg,
            p,
            Some(&mut debias),
            &mut g,
            &mut h,
        ) else {
            continue;
        };
        for (k, &r) in list.rows.iter().enumerate() {
            out.grad[r] += g[k];
            out.hess[r] += h[k];
        }
        out.loss += 1.0 - ndcg;
        used += 1;
    }
    out.loss /= used.max(1) as f64;
    (used > 0).then_some((out, (loss_plus, loss_minus)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::objective::lambda_grad_hess;

    fn list(rows: &[usize], clicks: &[i32]) -> ClickList {
        ClickList {
            rows: rows.to_vec(),
            clicks: clicks.to_vec(),
        }
    }

    /// With t⁺ = t⁻ = 1 a group's gradient is the sum of plain LambdaMART's over its lists,
    /// each list a query with the clicks as labels.
    #[test]
    fn unit_biases_give_the_plain_lambdas_summed_over_lists() {
        let scores = [0.3, -1.2, 0.8, 0.1, 2.0];
        let lists = [
            list(&[2, 0, 1, 4], &[0, 1, 0, 0]),
            list(&[0, 3, 4], &[1, 0, 1]),
            list(&[1, 2], &[0, 0]), // no click: nothing to learn
        ];
        let p = LambdaParams::default();
        let (got, _) = lists_grad_hess(&scores, &lists, &p, &PositionBias::ones(4)).unwrap();
        let (mut grad, mut hess, mut loss) = ([0.0; 5], [0.0; 5], 0.0);
        for l in &lists[..2] {
            let s: Vec<f64> = l.rows.iter().map(|&r| scores[r]).collect();
            let (mut g, mut h) = (vec![0.0; s.len()], vec![0.0; s.len()]);
            let v = lambda_grad_hess(&s, &l.clicks, LambdaMetric::Ndcg, &p, &mut g, &mut h);
            loss += 1.0 - v.unwrap();
            for (k, &r) in l.rows.iter().enumerate() {
                grad[r] += g[k];
                hess[r] += h[k];
            }
        }
        assert_eq!(got.grad, grad);
        assert_eq!(got.hess, hess);
        assert!((got.loss - loss / 2.0).abs() < 1e-15);
    }

    /// One list, clicked row at rank 2, unclicked rows at ranks 1 and 3, no normalisations
    /// (`norm: false`), σ = 1, computed by hand: both pairs' lambdas divided by
    /// t⁺₂·t⁻₁ and t⁺₂·t⁻₃, and the costs summed by rank.
    #[test]
    fn a_pair_is_divided_by_its_click_and_non_click_biases() {
        let scores = [0.5, 0.0, -0.5]; // model order = shown order
        let lists = [list(&[0, 1, 2], &[0, 1, 0])];
        let p = LambdaParams {
            norm: false,
            ..LambdaParams::default()
        };
        let bias = PositionBias {
            t_plus: vec![1.0, 0.5, 0.25],
            t_minus: vec![1.0, 0.8, 0.4],
        };
        let (got, got_costs) = lists_grad_hess(&scores, &lists, &p, &bias).unwrap();
        // Ideal DCG: one gain of 1 at rank 1. The clicked row is at model position 2.
        let d = |i: f64| 1.0 / (2.0 + i).log2();
        let dz_1 = (d(0.0) - d(1.0)).abs(); // swapped with rank 1
        let dz_3 = (d(1.0) - d(2.0)).abs(); // swapped with rank 3
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        // Pair (clicked 1, unclicked 0): s_high − s_low = −0.5; (1, 2): +0.5.
        let rho_1 = sig(0.5); // 1/(1 + e^{−0.5})
        let rho_3 = sig(-0.5);
        let lam_1 = dz_1 * rho_1 / (0.5 * 1.0);
        let lam_3 = dz_3 * rho_3 / (0.5 * 0.4);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(got.grad[1], -(lam_1 + lam_3)), "{:?}", got.grad);
        assert!(close(got.grad[0], lam_1));
        assert!(close(got.grad[2], lam_3));
        let h_1 = dz_1 * rho_1 * (1.0 - rho_1) / 0.5;
        let h_3 = dz_3 * rho_3 * (1.0 - rho_3) / 0.2;
        assert!(close(got.hess[1], h_1 + h_3));
        // Costs: |ΔZ|·ln(1 + e^{−(s_i − s_j)}).
        let cost_1 = dz_1 * (1.0 + 0.5f64.exp()).ln();
        let cost_3 = dz_3 * (1.0 + (-0.5f64).exp()).ln();
        assert!(close(got_costs.0[1], cost_1 / 1.0 + cost_3 / 0.4));
        assert_eq!((got_costs.0[0], got_costs.0[2]), (0.0, 0.0));
        assert!(close(got_costs.1[0], cost_1 / 0.5));
        assert!(close(got_costs.1[2], cost_3 / 0.5));
        assert_eq!(got_costs.1[1], 0.0);
    }

    #[test]
    fn the_update_is_the_normed_root_of_the_cost_ratio() {
        let mut bias = PositionBias::ones(3);
        bias.update(&[8.0, 1.0, 0.0], &[2.0, 2.0, 0.25], 2.0);
        let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12);
        assert!(close(&bias.t_plus, &[1.0, 0.5, 0.0]), "{bias:?}");
        assert!(close(&bias.t_minus, &[1.0, 1.0, 0.5]), "{bias:?}");
        // No cost at rank 1: the biases stay.
        bias.update(&[0.0, 1.0, 1.0], &[0.0, 1.0, 1.0], 2.0);
        assert!(close(&bias.t_plus, &[1.0, 0.5, 0.0]));
    }
}
