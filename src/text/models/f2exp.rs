//! SPEC §1.5 axiomatic F2-EXP (Fang & Zhai 2005).

use tantivy::query::Explanation;
use tantivy::schema::Field;

use super::{split_terms, DocMatch, Stats, TextModel};

#[derive(Debug, Clone)]
pub struct F2Exp {
    fields: [Field; 1],
    terms: Vec<String>,
    /// qtf(t) · (N/df(t))^k per term (0 for a term in no document).
    weight: Vec<f32>,
    s: f32,
    avgdl: f32,
}

impl F2Exp {
    pub fn new(
        stats: &Stats,
        field: Field,
        query: &[(String, u32)],
        k: f32,
        s: f32,
    ) -> tantivy::Result<Self> {
        let n = stats.num_docs() as f32;
        let (terms, qtf) = split_terms(query);
        let mut weight = Vec::with_capacity(terms.len());
        for (t, q) in terms.iter().zip(&qtf) {
            let df = stats.df(field, t)? as f32;
            weight.push(if df > 0.0 { q * (n / df).powf(k) } else { 0.0 });
        }
        Ok(F2Exp {
            fields: [field],
            terms,
            weight,
            s,
            avgdl: stats.avgdl(field)?,
        })
    }

    fn term_score(&self, w: f32, tf: f32, len: u32) -> f32 {
        let rel = if self.avgdl > 0.0 {
            len as f32 / self.avgdl
        } else {
            0.0
        };
        w * tf / (tf + self.s + self.s * rel)
    }
}

impl TextModel for F2Exp {
    fn name(&self) -> &'static str {
        "f2exp"
    }
    fn fields(&self) -> &[Field] {
        &self.fields
    }
    fn terms(&self) -> &[String] {
        &self.terms
    }

    fn score(&self, m: &DocMatch) -> f32 {
        let mut total = 0.0;
        for (t, w) in self.weight.iter().enumerate() {
            let tf = m.tf(t, 0) as f32;
            if tf > 0.0 {
                total += self.term_score(*w, tf, m.len[0]);
            }
        }
        total
    }

    fn explain(&self, m: &DocMatch) -> Explanation {
        let mut e = Explanation::new(
            "f2exp: sum of qtf·(N/df)^k·tf/(tf+s+s·|d|/avgdl)",
            self.score(m),
        );
        e.add_const("|d|", m.len[0] as f32);
        e.add_const("avgdl", self.avgdl);
        e.add_const("s", self.s);
        for (t, w) in self.weight.iter().enumerate() {
            let tf = m.tf(t, 0) as f32;
            if tf > 0.0 {
                let mut te = Explanation::new_with_string(
                    format!("term `{}` (qtf·(N/df)^k = {w})", self.terms[t]),
                    self.term_score(*w, tf, m.len[0]),
                );
                te.add_const("tf", tf);
                e.add_detail(te);
            }
        }
        e
    }
}
