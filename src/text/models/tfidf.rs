//! SPEC §1.2 TF-IDF, Lucene's "classic" similarity:
//! `coord · queryNorm · Σ sqrt(tf) · idf² · boost · 1/sqrt(|d|)` with `idf = 1 + ln(N/(df+1))`.
//! A term repeated in the query carries `boost = qtf`.

use tantivy::query::Explanation;
use tantivy::schema::Field;

use super::{split_terms, DocMatch, Stats, TextModel};

#[derive(Debug, Clone)]
pub struct TfIdf {
    fields: [Field; 1],
    terms: Vec<String>,
    /// idf(t)² · boost(t) per term.
    weight: Vec<f32>,
    query_norm: f32,
}

/// SPEC §1.2 idf.
pub(crate) fn tfidf_idf(df: u64, n: u64) -> f32 {
    1.0 + (n as f32 / (df as f32 + 1.0)).ln()
}

impl TfIdf {
    pub fn new(stats: &Stats, field: Field, query: &[(String, u32)]) -> tantivy::Result<Self> {
        let n = stats.num_docs();
        let (terms, boost) = split_terms(query);
        let mut weight = Vec::with_capacity(terms.len());
        let mut sum_sq = 0.0f32;
        for (t, boost) in terms.iter().zip(&boost) {
            let idf = tfidf_idf(stats.df(field, t)?, n);
            weight.push(idf * idf * boost);
            sum_sq += (idf * boost) * (idf * boost);
        }
        let query_norm = if sum_sq > 0.0 {
            1.0 / sum_sq.sqrt()
        } else {
            0.0
        };
        Ok(TfIdf {
            fields: [field],
            terms,
            weight,
            query_norm,
        })
    }

    fn parts(&self, m: &DocMatch) -> (f32, f32) {
        let norm = if m.len[0] > 0 {
            1.0 / (m.len[0] as f32).sqrt()
        } else {
            0.0
        };
        let (mut sum, mut matched) = (0.0, 0usize);
        for (t, w) in self.weight.iter().enumerate() {
            let tf = m.tf(t, 0);
            if tf > 0 {
                matched += 1;
                sum += (tf as f32).sqrt() * w * norm;
            }
        }
        let coord = matched as f32 / self.terms.len().max(1) as f32;
        (coord, sum)
    }
}

impl TextModel for TfIdf {
    fn name(&self) -> &'static str {
        "tfidf"
    }
    fn fields(&self) -> &[Field] {
        &self.fields
    }
    fn terms(&self) -> &[String] {
        &self.terms
    }

    fn score(&self, m: &DocMatch) -> f32 {
        let (coord, sum) = self.parts(m);
        coord * self.query_norm * sum
    }

    fn explain(&self, m: &DocMatch) -> Explanation {
        let (coord, sum) = self.parts(m);
        let mut e = Explanation::new(
            "tfidf (Lucene classic): coord·queryNorm·sum of sqrt(tf)·idf²·boost/sqrt(|d|)",
            self.score(m),
        );
        e.add_const("coord", coord);
        e.add_const("queryNorm", self.query_norm);
        e.add_const("sum", sum);
        e.add_const("|d|", m.len[0] as f32);
        e
    }
}
