//! SPEC §1.6 query likelihood with Dirichlet smoothing, in its full form
//! `Σ_t qtf·ln((tf + μ·p(t|C)) / (|d| + μ))` over every query term.
//!
//! Only documents containing at least one query term are retrieved (as in every engine that
//! evaluates the model over postings). Query terms that occur nowhere in the collection
//! (cf = 0, so p(t|C) = 0 and the log is −∞ for every document) are dropped from the query.

use tantivy::query::Explanation;
use tantivy::schema::Field;

use super::{split_terms, DocMatch, Stats, TextModel};

#[derive(Debug, Clone)]
pub struct LmDirichlet {
    fields: [Field; 1],
    terms: Vec<String>,
    qtf: Vec<f32>,
    /// μ·p(t|C) per term.
    mu_p: Vec<f32>,
    mu: f32,
}

impl LmDirichlet {
    pub fn new(
        stats: &Stats,
        field: Field,
        query: &[(String, u32)],
        mu: f32,
    ) -> tantivy::Result<Self> {
        let collection_len = stats.total_tokens(field)? as f64;
        let (all_terms, all_qtf) = split_terms(query);
        let (mut terms, mut qtf, mut mu_p) = (Vec::new(), Vec::new(), Vec::new());
        for (t, q) in all_terms.into_iter().zip(all_qtf) {
            let cf = stats.cf(field, &t)?;
            if cf > 0 {
                mu_p.push((mu as f64 * cf as f64 / collection_len) as f32);
                terms.push(t);
                qtf.push(q);
            }
        }
        Ok(LmDirichlet {
            fields: [field],
            terms,
            qtf,
            mu_p,
            mu,
        })
    }

    fn term_score(&self, t: usize, tf: u32, len: u32) -> f32 {
        let num = tf as f64 + self.mu_p[t] as f64;
        let den = len as f64 + self.mu as f64;
        (self.qtf[t] as f64 * (num / den).ln()) as f32
    }
}

impl TextModel for LmDirichlet {
    fn name(&self) -> &'static str {
        "lm"
    }
    fn fields(&self) -> &[Field] {
        &self.fields
    }
    fn terms(&self) -> &[String] {
        &self.terms
    }

    fn score(&self, m: &DocMatch) -> f32 {
        (0..self.terms.len())
            .map(|t| self.term_score(t, m.tf(t, 0), m.len[0]))
            .sum()
    }

    fn explain(&self, m: &DocMatch) -> Explanation {
        let mut e = Explanation::new(
            "lm (Dirichlet): sum of qtf·ln((tf + mu·p(t|C))/(|d| + mu))",
            self.score(m),
        );
        e.add_const("|d|", m.len[0] as f32);
        e.add_const("mu", self.mu);
        for t in 0..self.terms.len() {
            let mut te = Explanation::new_with_string(
                format!("term `{}` (mu·p(t|C) = {})", self.terms[t], self.mu_p[t]),
                self.term_score(t, m.tf(t, 0), m.len[0]),
            );
            te.add_const("tf", m.tf(t, 0) as f32);
            e.add_detail(te);
        }
        e
    }
}
