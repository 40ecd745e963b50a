//! SPEC §1.4 BM25F (Robertson & Zaragoza's simple BM25F): per-field weights and length
//! normalisation, saturation applied once after weighting. Not a sum of per-field BM25s.

use tantivy::query::Explanation;
use tantivy::schema::Field;

use super::{bm25_idf, DocMatch, Stats, TextModel};

/// One field's part in BM25F.
#[derive(Debug, Clone, Copy)]
pub struct Bm25fField {
    pub field: Field,
    pub weight: f32,
    pub b: f32,
}

#[derive(Debug, Clone)]
pub struct Bm25F {
    fields: Vec<Field>,
    weight: Vec<f32>,
    b: Vec<f32>,
    avgdl: Vec<f32>,
    terms: Vec<String>,
    /// qtf(t) · idf(t), idf from df over documents containing t in any field.
    term_weight: Vec<f32>,
    k1: f32,
}

impl Bm25F {
    /// `df_field` is a field holding the union of the BM25F fields (rankd's `all`), so that
    /// `df` counts documents containing the term in any of them (SPEC §1.4).
    pub fn new(
        stats: &Stats,
        parts: &[Bm25fField],
        df_field: Field,
        query: &[(String, u32)],
        k1: f32,
    ) -> tantivy::Result<Self> {
        let weighted: Vec<(String, f64)> = query
            .iter()
            .map(|(t, q)| (t.clone(), f64::from(*q)))
            .collect();
        Self::weighted(stats, parts, df_field, &weighted, k1)
    }

    /// BM25F with a real-valued weight per term in place of `qtf` (an expanded query, whose
    /// weights are probabilities): `Σ_t w(t)·idf(t)·tf~·(k1+1)/(tf~ + k1)`.
    pub fn weighted(
        stats: &Stats,
        parts: &[Bm25fField],
        df_field: Field,
        query: &[(String, f64)],
        k1: f32,
    ) -> tantivy::Result<Self> {
        let n = stats.num_docs();
        let mut terms = Vec::with_capacity(query.len());
        let mut term_weight = Vec::with_capacity(query.len());
        for (t, w) in query {
            term_weight.push((w * f64::from(bm25_idf(stats.df(df_field, t)?, n))) as f32);
            terms.push(t.clone());
        }
        let mut avgdl = Vec::with_capacity(parts.len());
        for p in parts {
            avgdl.push(stats.avgdl(p.field)?);
        }
        Ok(Bm25F {
            fields: parts.iter().map(|p| p.field).collect(),
            weight: parts.iter().map(|p| p.weight).collect(),
            b: parts.iter().map(|p| p.b).collect(),
            avgdl,
            terms,
            term_weight,
            k1,
        })
    }

    /// `B_u = 1 − b_u + b_u·|d.u|/avgdl_u`; a field empty in the whole collection has B_u = 1.
    fn length_norms(&self, len: &[u32]) -> Vec<f32> {
        (0..self.fields.len())
            .map(|u| {
                if self.avgdl[u] > 0.0 {
                    1.0 - self.b[u] + self.b[u] * len[u] as f32 / self.avgdl[u]
                } else {
                    1.0
                }
            })
            .collect()
    }

    fn pseudo_tf(&self, m: &DocMatch, t: usize, norms: &[f32]) -> f32 {
        (0..self.fields.len())
            .map(|u| self.weight[u] * m.tf(t, u) as f32 / norms[u])
            .sum()
    }
}

impl TextModel for Bm25F {
    fn name(&self) -> &'static str {
        "bm25f"
    }
    fn fields(&self) -> &[Field] {
        &self.fields
    }
    fn terms(&self) -> &[String] {
        &self.terms
    }

    fn score(&self, m: &DocMatch) -> f32 {
        let norms = self.length_norms(m.len);
        let mut s = 0.0;
        for (t, w) in self.term_weight.iter().enumerate() {
            let tf = self.pseudo_tf(m, t, &norms);
            if tf > 0.0 {
                s += w * tf * (self.k1 + 1.0) / (tf + self.k1);
            }
        }
        s
    }

    /// `w·idf·tf~·(k1+1)/(tf~+k1) < w·idf·(k1+1)` for every pseudo-frequency.
    fn term_upper_bounds(&self) -> Option<Vec<f32>> {
        super::saturating_bounds(&self.term_weight, self.k1)
    }

    fn explain(&self, m: &DocMatch) -> Explanation {
        let mut e = Explanation::new(
            "bm25f: sum of qtf·idf·tf~·(k1+1)/(tf~+k1), tf~ = sum_u w_u·tf_u/B_u",
            self.score(m),
        );
        e.add_const("k1", self.k1);
        let norms = self.length_norms(m.len);
        for (u, norm) in norms.iter().enumerate() {
            e.add_detail(Explanation::new_with_string(
                format!(
                    "B_{u} (w = {}, b = {}, avgdl = {}, |d.u| = {})",
                    self.weight[u], self.b[u], self.avgdl[u], m.len[u]
                ),
                *norm,
            ));
        }
        for (t, w) in self.term_weight.iter().enumerate() {
            let tf = self.pseudo_tf(m, t, &norms);
            if tf > 0.0 {
                let mut te = Explanation::new_with_string(
                    format!("term `{}` (qtf·idf = {w})", self.terms[t]),
                    w * tf * (self.k1 + 1.0) / (tf + self.k1),
                );
                te.add_const("tf~", tf);
                e.add_detail(te);
            }
        }
        e
    }
}
