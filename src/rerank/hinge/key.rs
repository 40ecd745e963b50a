//! A document as one `u64` whose natural order is the ranking order: descending score, ties
//! by ascending index. Selection and sorting then compare plain integers instead of
//! (float, index) pairs, which is most of the cost of both inference algorithms.

/// Packs a finite score (−0.0 treated as +0.0) and the document's index.
pub(super) fn key(score: f32, index: u32) -> u64 {
    let bits = (score + 0.0).to_bits();
    // Negative floats: larger bits = more negative = later; positive ones reversed so that
    // larger scores come first, all of them before any negative score.
    let descending = if bits >> 31 == 1 {
        bits
    } else {
        bits ^ 0x7FFF_FFFF
    };
    (u64::from(descending) << 32) | u64::from(index)
}

pub(super) fn score(key: u64) -> f32 {
    let descending = (key >> 32) as u32;
    let bits = if descending >> 31 == 1 {
        descending
    } else {
        descending ^ 0x7FFF_FFFF
    };
    f32::from_bits(bits)
}

pub(super) fn index(key: u64) -> u32 {
    key as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_is_descending_score_then_ascending_index() {
        let scores = [
            f32::MAX,
            1e30,
            2.5,
            1.0,
            1e-40, // subnormal
            0.0,
            -0.0,
            -1e-40,
            -1.0,
            -2.5,
            f32::MIN,
        ];
        let mut pairs = Vec::new();
        for (i, &s) in scores.iter().enumerate() {
            for index in [7u32, 0, u32::MAX] {
                pairs.push((s, index ^ i as u32));
            }
        }
        let mut by_key = pairs.clone();
        by_key.sort_by_key(|&(s, i)| key(s, i));
        let mut by_value = pairs.clone();
        by_value.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
        assert_eq!(by_key, by_value);
        for (s, i) in pairs {
            assert_eq!(score(key(s, i)), s + 0.0);
            assert_eq!(index(key(s, i)), i);
        }
    }
}
