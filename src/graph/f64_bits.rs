//! Serde adapter storing `Vec<f64>` as `Vec<u64>` bit patterns (exact round trip): the link
//! scores' vectors (`scores::LinkScores`, `simrank::SimRankDiagonal`) in the sidecar file, which
//! must reload bit for bit where serde_json's float parser may be off by one ulp.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub(crate) fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
    v.iter()
        .map(|x| x.to_bits())
        .collect::<Vec<u64>>()
        .serialize(s)
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Ok(Vec::<u64>::deserialize(d)?
        .into_iter()
        .map(f64::from_bits)
        .collect())
}
