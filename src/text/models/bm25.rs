//! SPEC §1.3 BM25 over one field, with that field's own k1 and b.

use tantivy::query::Explanation;
use tantivy::schema::Field;

use super::{bm25_idf, DocMatch, Stats, TextModel};

#[derive(Debug, Clone)]
pub struct Bm25 {
    fields: [Field; 1],
    terms: Vec<String>,
    /// qtf(t) · idf(t) per term.
    weight: Vec<f32>,
    k1: f32,
    b: f32,
    avgdl: f32,
}

impl Bm25 {
    pub fn new(
        stats: &Stats,
        field: Field,
        query: &[(String, u32)],
        k1: f32,
        b: f32,
    ) -> tantivy::Result<Self> {
        let weighted: Vec<(String, f64)> = query
            .iter()
            .map(|(t, q)| (t.clone(), f64::from(*q)))
            .collect();
        Self::weighted(stats, field, &weighted, k1, b)
    }

    /// BM25 with a real-valued weight per term in place of `qtf` (an expanded query, whose
    /// weights are probabilities): `Σ_t w(t)·idf(t)·tf·(k1+1)/(tf + k1·(1 − b + b·|d|/avgdl))`.
    pub fn weighted(
        stats: &Stats,
        field: Field,
        query: &[(String, f64)],
        k1: f32,
        b: f32,
    ) -> tantivy::Result<Self> {
        let n = stats.num_docs();
        let mut terms = Vec::with_capacity(query.len());
        let mut weight = Vec::with_capacity(query.len());
        for (t, w) in query {
            weight.push((*w * f64::from(bm25_idf(stats.df(field, t)?, n))) as f32);
            terms.push(t.clone());
        }
        Ok(Bm25 {
            fields: [field],
            terms,
            weight,
            k1,
            b,
            avgdl: stats.avgdl(field)?,
        })
    }

    /// The length normalisation `k1·(1 − b + b·|d|/avgdl)`.
    fn norm(&self, len: u32) -> f32 {
        let rel = if self.avgdl > 0.0 {
            len as f32 / self.avgdl
        } else {
            0.0
        };
        self.k1 * (1.0 - self.b + self.b * rel)
    }
}

impl TextModel for Bm25 {
    fn name(&self) -> &'static str {
        "bm25"
    }
    fn fields(&self) -> &[Field] {
        &self.fields
    }
    fn terms(&self) -> &[String] {
        &self.terms
    }

    fn score(&self, m: &DocMatch) -> f32 {
        let norm = self.norm(m.len[0]);
        let mut s = 0.0;
        for (t, w) in self.weight.iter().enumerate() {
            let tf = m.tf(t, 0) as f32;
            if tf > 0.0 {
                s += w * tf * (self.k1 + 1.0) / (tf + norm);
            }
        }
        s
    }

    /// `w·tf·(k1+1)/(tf+K) < w·(k1+1)` for every frequency (K > 0).
    fn term_upper_bounds(&self) -> Option<Vec<f32>> {
        super::saturating_bounds(&self.weight, self.k1)
    }

    fn explain(&self, m: &DocMatch) -> Explanation {
        let mut e = Explanation::new(
            "bm25: sum of qtf·idf·tf·(k1+1)/(tf+k1·(1−b+b·|d|/avgdl))",
            self.score(m),
        );
        e.add_const("|d|", m.len[0] as f32);
        e.add_const("avgdl", self.avgdl);
        e.add_const("k1", self.k1);
        e.add_const("b", self.b);
        let norm = self.norm(m.len[0]);
        for (t, w) in self.weight.iter().enumerate() {
            let tf = m.tf(t, 0) as f32;
            if tf > 0.0 {
                let mut te = Explanation::new_with_string(
                    format!("term `{}` (qtf·idf = {w})", self.terms[t]),
                    w * tf * (self.k1 + 1.0) / (tf + norm),
                );
                te.add_const("tf", tf);
                e.add_detail(te);
            }
        }
        e
    }
}
