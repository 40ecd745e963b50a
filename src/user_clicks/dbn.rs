//! The dynamic Bayesian network click model (SPEC §11; Chapelle and Zhang 2009), fitted by EM.
//!
//! The user examines rank 1; a click means the examined document attracted (probability
//! `a_{q,d}`); after a click the user is satisfied with probability `s_{q,d}` and leaves;
//! otherwise (no click, or an unsatisfying one) they go on to the next rank with probability γ
//! (perseverance). Unlike the position-based model, examination depends on the documents
//! above, so the model has no per-rank propensity ([`ClickModel::examination`] is `None`).
//!
//! The E-step is exact: within a session everything above the last click was examined, and
//! below it the posterior of examination follows from the probability `ν_k` of no click from
//! rank k down given rank k is examined (`ν_k = (1 − a_k)((1 − γ) + γ ν_{k+1})`, `ν_{n+1} = 1`).
//! The posteriors (`e_k = P(E_k = 1 | clicks)`):
//! - attraction: 1 if clicked, else `(1 − e_k) a_k` (an unexamined document's attraction is
//!   its prior);
//! - satisfaction: 0 except at the last click l, `s_l / (s_l + (1 − s_l)((1 − γ) + γ ν_{l+1}))`;
//! - continuation from rank k: `e_{k+1}` over `e_k − P(S_k = 1 | clicks)`.
//!
//! The M-step sets `a` to the mean attraction posterior over the pair's impressions, `s` to
//! the mean satisfaction posterior over its clicks, and γ to the ratio of the continuation
//! sums. Written here for the reason the other models are (see [`super`]); the log-likelihood
//! of the same parameters agrees with `clax`'s DBN (bench/click_models_crosscheck.py).

use std::collections::HashMap;

use super::{clamp, Attractiveness, BetaPrior, ClickModel, Pair, Parameters, Session};

/// A fitted dynamic Bayesian network.
#[derive(Debug, Clone)]
pub struct Dbn {
    /// Perseverance γ: the probability of going on to the next rank when not satisfied.
    pub gamma: f64,
    attraction: Attractiveness,
    satisfaction: Attractiveness,
}

/// Sessions as rows of numbered pairs, what an EM iteration walks.
struct Indexed {
    pairs: Vec<Pair>,
    sessions: Vec<(Vec<usize>, Vec<bool>)>,
}

impl Indexed {
    fn of(sessions: &[Session]) -> Indexed {
        let mut index: HashMap<Pair, usize> = HashMap::new();
        let mut pairs = Vec::new();
        let sessions = sessions
            .iter()
            .map(|s| {
                let ids = s
                    .shown
                    .iter()
                    .map(|doc| {
                        let pair = (s.query.clone(), doc.clone());
                        *index.entry(pair.clone()).or_insert_with(|| {
                            pairs.push(pair);
                            pairs.len() - 1
                        })
                    })
                    .collect();
                (ids, s.clicks.clone())
            })
            .collect();
        Indexed { pairs, sessions }
    }
}

/// One session's posteriors: attraction and satisfaction per rank, examination per rank.
struct Posteriors {
    attraction: Vec<f64>,
    satisfaction: Vec<f64>,
    examination: Vec<f64>,
}

/// The exact E-step of one session with attraction `a`, satisfaction `s` (per rank) and γ.
fn posteriors(a: &[f64], s: &[f64], clicks: &[bool], gamma: f64) -> Posteriors {
    let n = a.len();
    let mut nu = vec![1.0; n + 1];
    for k in (0..n).rev() {
        nu[k] = (1.0 - a[k]) * ((1.0 - gamma) + gamma * nu[k + 1]);
    }
    let last = clicks.iter().rposition(|&c| c);
    let start = last.map_or(0, |l| l + 1);
    // P(E_start = 1 | clicks down to the last one).
    let reach = last.map_or(1.0, |l| gamma * (1.0 - s[l]));
    let none_below = (1.0 - reach) + reach * nu[start];
    let mut examination = vec![1.0; n];
    let mut r = reach;
    for k in start..n {
        examination[k] = r * nu[k] / none_below;
        r *= (1.0 - a[k]) * gamma;
    }
    let mut satisfaction = vec![0.0; n];
    if let Some(l) = last {
        let rest = (1.0 - gamma) + gamma * nu[l + 1];
        satisfaction[l] = s[l] / (s[l] + (1.0 - s[l]) * rest);
    }
    let attraction = (0..n)
        .map(|k| {
            if clicks[k] {
                1.0
            } else {
                (1.0 - examination[k]) * a[k]
            }
        })
        .collect();
    Posteriors {
        attraction,
        satisfaction,
        examination,
    }
}

impl Dbn {
    /// Fits the model to `sessions` with `iterations` rounds of EM from a = s = γ = 0.5, with
    /// `prior` on each pair's attraction and satisfaction.
    pub fn fit(sessions: &[Session], iterations: usize, prior: BetaPrior) -> Dbn {
        Dbn::fit_observed(sessions, iterations, prior, None)
    }

    /// [`Dbn::fit`], calling `observe` (if any) with the model after each iteration.
    pub(crate) fn fit_observed(
        sessions: &[Session],
        iterations: usize,
        prior: BetaPrior,
        mut observe: Option<&mut dyn FnMut(&Dbn)>,
    ) -> Dbn {
        let indexed = Indexed::of(sessions);
        let mut a = vec![0.5; indexed.pairs.len()];
        let mut s = vec![0.5; indexed.pairs.len()];
        let mut gamma = 0.5;
        let model = |a: &[f64], s: &[f64], gamma: f64| Dbn {
            gamma,
            attraction: pair_table(&indexed.pairs, a),
            satisfaction: pair_table(&indexed.pairs, s),
        };
        for _ in 0..iterations {
            let mut a_sum = vec![(0.0, 0usize); a.len()];
            let mut s_sum = vec![(0.0, 0usize); s.len()];
            let (mut go_on, mut could) = (0.0, 0.0);
            for (ids, clicks) in &indexed.sessions {
                let ak: Vec<f64> = ids.iter().map(|&i| a[i]).collect();
                let sk: Vec<f64> = ids.iter().map(|&i| s[i]).collect();
                let p = posteriors(&ak, &sk, clicks, gamma);
                for (k, &i) in ids.iter().enumerate() {
                    a_sum[i].0 += p.attraction[k];
                    a_sum[i].1 += 1;
                    if clicks[k] {
                        s_sum[i].0 += p.satisfaction[k];
                        s_sum[i].1 += 1;
                    }
                    if k + 1 < ids.len() {
                        go_on += p.examination[k + 1];
                        could += p.examination[k] - p.satisfaction[k];
                    }
                }
            }
            for (v, &(sum, n)) in a.iter_mut().zip(&a_sum).chain(s.iter_mut().zip(&s_sum)) {
                if n > 0 {
                    *v = prior.estimate(sum, n);
                }
            }
            if could > 0.0 {
                gamma = clamp(go_on / could);
            }
            if let Some(observe) = observe.as_mut() {
                observe(&model(&a, &s, gamma));
            }
        }
        model(&a, &s, gamma)
    }

    /// The probability that `doc` satisfies a user who clicked it for `query`.
    pub fn satisfaction(&self, query: &str, doc: &str) -> f64 {
        self.satisfaction.get(query, doc)
    }
}

fn pair_table(pairs: &[Pair], values: &[f64]) -> Attractiveness {
    Attractiveness {
        by_pair: pairs.iter().cloned().zip(values.iter().copied()).collect(),
        prior: 0.5,
    }
}

impl ClickModel for Dbn {
    /// Filtering down the list: `P(E_1 = 1) = 1`; after a click `P(E_{k+1}) = γ(1 − s_k)`;
    /// after none `γ e_k (1 − a_k)/(1 − e_k a_k)`.
    fn click_probabilities(&self, session: &Session) -> Vec<f64> {
        let mut e = 1.0;
        session
            .shown
            .iter()
            .zip(&session.clicks)
            .map(|(doc, &clicked)| {
                let a = self.attraction.get(&session.query, doc);
                let p = e * a;
                e = if clicked {
                    self.gamma * (1.0 - self.satisfaction.get(&session.query, doc))
                } else {
                    self.gamma * e * (1.0 - a) / (1.0 - p)
                };
                super::observed(p, clicked)
            })
            .collect()
    }

    /// Reaching a rank depends on the documents above and their clicks.
    fn examination(&self, rank: usize) -> Option<f64> {
        (rank <= 1).then_some(1.0)
    }

    fn attractiveness(&self, query: &str, doc: &str) -> f64 {
        self.attraction.get(query, doc)
    }

    fn parameters(&self) -> Parameters {
        let mut pairs = self.attraction.pairs();
        for p in &mut pairs {
            p.satisfaction = Some(self.satisfaction.get(&p.query, &p.doc));
        }
        Parameters {
            model: "dbn",
            examination: Vec::new(),
            continuation: Some(self.gamma),
            pairs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{evaluate, pbm::Pbm};
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const GAMMA: f64 = 0.85;

    fn attraction(q: usize, d: usize) -> f64 {
        0.1 + 0.8 * (((q * 7 + d * 3) % 10) as f64 / 9.0)
    }

    fn satisfaction(q: usize, d: usize) -> f64 {
        0.2 + 0.6 * (((q * 3 + d * 5) % 7) as f64 / 6.0)
    }

    /// Sessions drawn from a DBN with the parameters above, each a random order of 8 of the
    /// query's 10 documents.
    fn simulate(n: usize, queries: usize, seed: u64) -> Vec<Session> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let q = i % queries;
                let mut order: Vec<usize> = (0..10).collect();
                rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut rng);
                order.truncate(8);
                let mut examined = true;
                let clicks = order
                    .iter()
                    .map(|&d| {
                        if !examined {
                            return false;
                        }
                        let click = rng.random::<f64>() < attraction(q, d);
                        let satisfied = click && rng.random::<f64>() < satisfaction(q, d);
                        examined = !satisfied && rng.random::<f64>() < GAMMA;
                        click
                    })
                    .collect();
                Session {
                    query: format!("q{q}"),
                    shown: order.iter().map(|d| format!("d{d}")).collect(),
                    clicks,
                }
            })
            .collect()
    }

    /// Hand-computed E-step of a 3-document session clicked at rank 1 only, a = (0.5, 0.4,
    /// 0.2), s = 0.3 everywhere, γ = 0.8:
    /// ν_3 = 0.8, ν_2 = 0.6 · (0.2 + 0.8 · 0.8) = 0.504;
    /// P(E_2) = γ(1 − s_1) = 0.56; no click below: 0.44 + 0.56 · 0.504 = 0.72224;
    /// e_2 = 0.56 · 0.504 / 0.72224, e_3 = 0.56 · 0.6 · 0.8 · 0.8 / 0.72224;
    /// satisfaction at rank 1: 0.3 / (0.3 + 0.7 · (0.2 + 0.8 · 0.504)).
    #[test]
    fn the_e_step_matches_a_hand_computed_session() {
        let p = posteriors(
            &[0.5, 0.4, 0.2],
            &[0.3, 0.3, 0.3],
            &[true, false, false],
            0.8,
        );
        let z = 0.44 + 0.56 * 0.504;
        let e2 = 0.56 * 0.504 / z;
        let e3 = 0.56 * 0.6 * 0.8 * 0.8 / z;
        assert!((p.examination[0] - 1.0).abs() < 1e-12);
        assert!(
            (p.examination[1] - e2).abs() < 1e-12,
            "{}",
            p.examination[1]
        );
        assert!(
            (p.examination[2] - e3).abs() < 1e-12,
            "{}",
            p.examination[2]
        );
        let sat = 0.3 / (0.3 + 0.7 * (0.2 + 0.8 * 0.504));
        assert!((p.satisfaction[0] - sat).abs() < 1e-12);
        assert_eq!(p.attraction[0], 1.0);
        assert!((p.attraction[1] - (1.0 - e2) * 0.4).abs() < 1e-12);
        assert!((p.attraction[2] - (1.0 - e3) * 0.2).abs() < 1e-12);
    }

    /// The posteriors are consistent with the likelihood: summing the joint over the hidden
    /// variables by brute force gives the same examination posterior.
    #[test]
    fn the_examination_posterior_matches_brute_force() {
        let a = [0.6, 0.3, 0.5, 0.7];
        let s = [0.4, 0.2, 0.5, 0.3];
        let gamma = 0.7;
        for mask in 0u32..16 {
            let clicks: Vec<bool> = (0..4).map(|k| mask & (1 << k) != 0).collect();
            // Enumerate the depth the user examined down to (E_k = 1 for k < depth) and,
            // for each examined rank, attraction; satisfaction is summed analytically.
            let mut joint = [0.0; 4];
            let mut total = 0.0;
            for depth in 1..=4usize {
                // Probability of these clicks with ranks 1..depth examined and no further.
                let mut p = 1.0;
                for k in 0..4 {
                    if k < depth {
                        p *= if clicks[k] { a[k] } else { 1.0 - a[k] };
                        if k + 1 < depth {
                            // Went on: not satisfied (if clicked) and persevered.
                            p *= (if clicks[k] { 1.0 - s[k] } else { 1.0 }) * gamma;
                        } else if k + 1 < 4 {
                            // Stopped here: satisfied, or not and gave up.
                            p *= if clicks[k] {
                                s[k] + (1.0 - s[k]) * (1.0 - gamma)
                            } else {
                                1.0 - gamma
                            };
                        }
                    } else if clicks[k] {
                        p = 0.0;
                    }
                }
                total += p;
                for j in joint.iter_mut().take(depth) {
                    *j += p;
                }
            }
            if total == 0.0 {
                continue;
            }
            let post = posteriors(&a, &s, &clicks, gamma);
            for (k, (&e, &j)) in post.examination.iter().zip(&joint).enumerate() {
                assert!(
                    (e - j / total).abs() < 1e-12,
                    "clicks {clicks:?} rank {}: {e} vs {}",
                    k + 1,
                    j / total
                );
            }
            // And the filtered click probabilities multiply to the same total.
            let model = Dbn {
                gamma,
                attraction: pair_table(
                    &(0..4)
                        .map(|k| ("q".into(), format!("d{k}")))
                        .collect::<Vec<_>>(),
                    &a,
                ),
                satisfaction: pair_table(
                    &(0..4)
                        .map(|k| ("q".into(), format!("d{k}")))
                        .collect::<Vec<_>>(),
                    &s,
                ),
            };
            let session = Session {
                query: "q".into(),
                shown: (0..4).map(|k| format!("d{k}")).collect(),
                clicks: clicks.clone(),
            };
            let product: f64 = model.click_probabilities(&session).iter().product();
            assert!((product - total).abs() < 1e-12, "{product} vs {total}");
        }
    }

    #[test]
    fn recovers_the_simulators_parameters_and_never_loses_likelihood() {
        let sessions = simulate(30_000, 10, 5);
        let mut last = f64::NEG_INFINITY;
        let model = Dbn::fit_observed(
            &sessions,
            60,
            BetaPrior::NONE,
            Some(&mut |m: &Dbn| {
                let ll = evaluate(m, &sessions).log_likelihood;
                assert!(ll >= last - 1e-12, "{ll} < {last}");
                last = ll;
            }),
        );
        assert!((model.gamma - GAMMA).abs() < 0.03, "γ {}", model.gamma);
        let mut worst = (0.0f64, 0.0f64);
        for q in 0..10 {
            for d in 0..10 {
                let (qs, ds) = (format!("q{q}"), format!("d{d}"));
                worst.0 = worst
                    .0
                    .max((model.attractiveness(&qs, &ds) - attraction(q, d)).abs());
                worst.1 = worst
                    .1
                    .max((model.satisfaction(&qs, &ds) - satisfaction(q, d)).abs());
            }
        }
        assert!(worst.0 < 0.08 && worst.1 < 0.15, "worst errors {worst:?}");
        // On its own data the DBN explains the clicks better than a position-based model.
        let pbm = Pbm::fit(&sessions, 60, BetaPrior::NONE);
        let (d, p) = (evaluate(&model, &sessions), evaluate(&pbm, &sessions));
        assert!(d.log_likelihood > p.log_likelihood, "{d:?} {p:?}");
    }
}
