//! SPEC §1.4 BM25F (Robertson & Zaragoza's simple BM25F): per-field weights and length
//! normalisation, saturation applied once after weighting. Not a sum of per-field BM25s.

use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::Explanation;
use tantivy::schema::Field;

use super::{bm25_idf, DocMatch, Stats, TextModel};

/// The most fields one BM25F reads (rankd's schema has six text fields).
const MAX_FIELDS: usize = 8;

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
    /// `norms[u][code]`: `B_u` of a length whose fieldnorm code is `code`, so that scoring
    /// a document looks its length normalisations up instead of computing them.
    norms: Vec<[f32; 256]>,
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
        if parts.len() > MAX_FIELDS {
            return Err(tantivy::TantivyError::InvalidArgument(format!(
                "BM25F over {} fields: at most {MAX_FIELDS}",
                parts.len()
            )));
        }
        let mut avgdl = Vec::with_capacity(parts.len());
        for p in parts {
            avgdl.push(stats.avgdl(p.field)?);
        }
        let b: Vec<f32> = parts.iter().map(|p| p.b).collect();
        let norms = (0..parts.len())
            .map(|u| {
                std::array::from_fn(|code| {
                    length_norm(b[u], avgdl[u], FieldNormReader::id_to_fieldnorm(code as u8))
                })
            })
            .collect();
        Ok(Bm25F {
            fields: parts.iter().map(|p| p.field).collect(),
            weight: parts.iter().map(|p| p.weight).collect(),
            b,
            avgdl,
            norms,
            terms,
            term_weight,
            k1,
        })
    }

    /// `B_u` of every field of `m`, from the tables (on the stack: this runs once per scored
    /// document, and a heap vector here cost ~5% of a default search in malloc and free).
    fn length_norms(&self, m: &DocMatch) -> [f32; MAX_FIELDS] {
        let mut norms = [1.0; MAX_FIELDS];
        for (u, norm) in norms.iter_mut().enumerate().take(self.fields.len()) {
            *norm = self.norms[u][m.norm_ids[u] as usize];
        }
        norms
    }

    /// `tf~ = Σ_u w_u·tf_u/B_u`, fields in order, fields without the term skipped: adding
    /// their zero changes no bit of the sum, and skipping it spares a division (and the 0/0 of
    /// an empty field with b = 1, whose NaN would drop the term from the score).
    fn pseudo_tf(&self, m: &DocMatch, t: usize, norms: &[f32]) -> f32 {
        let mut sum = 0.0;
        for (u, (&weight, &norm)) in self.weight.iter().zip(norms).enumerate() {
            let tf = m.tf(t, u);
            if tf != 0 {
                sum += weight * tf as f32 / norm;
            }
        }
        sum
    }
}

/// `B_u = 1 − b_u + b_u·|d.u|/avgdl_u`; a field empty in the whole collection has B_u = 1.
fn length_norm(b: f32, avgdl: f32, len: u32) -> f32 {
    if avgdl > 0.0 {
        1.0 - b + b * len as f32 / avgdl
    } else {
        1.0
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
        let norms = self.length_norms(m);
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
        let norms = self.length_norms(m);
        for (u, norm) in norms.iter().enumerate().take(self.fields.len()) {
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
