//! The vector file's round trip and refusals, the dot product and the exact scan against
//! brute force (the engine's dense search is tested in `crate::search`).

use super::*;

fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

fn vectors(ids: &[&str], dim: usize, seed: u64) -> Vectors {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut data = Vec::new();
    for _ in ids {
        data.extend(unit((0..dim).map(|_| rng.random::<f32>() - 0.5).collect()));
    }
    Vectors {
        model: "m".into(),
        model_dir: "/m".into(),
        text: DocText::DEFAULT.name(),
        dim,
        ids: ids.iter().map(|s| s.to_string()).collect(),
        text_hashes: ids.iter().map(|s| text_hash(s)).collect(),
        data,
    }
}

#[test]
fn dot_equals_the_plain_sum() {
    for len in [0, 1, 7, 8, 9, 384, 389] {
        let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
        let plain: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum();
        assert!((f64::from(dot(&a, &b)) - plain).abs() < 1e-4, "len {len}");
    }
}

#[test]
fn the_file_round_trips_and_damage_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = store::path(dir.path());
    assert_eq!(store::read(&path).unwrap(), None);
    let v = vectors(&["a", "b", "c/d.html"], 16, 1);
    store::write(&path, &v).unwrap();
    assert_eq!(store::read(&path).unwrap(), Some(v.clone()));
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let e = store::read(&path).unwrap_err().to_string();
    assert!(e.contains("vectors.bin") && e.contains("checksum"), "{e}");
    std::fs::write(&path, b"{\"format\":\"x\"}\n").unwrap();
    let e = store::read(&path).unwrap_err().to_string();
    assert!(e.contains("vectors.bin") && e.contains("header"), "{e}");
    // A file cut short (a torn write the atomic rename prevents, or a damaged disk).
    store::write(&path, &v).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
    assert!(store::read(&path).is_err());
}

#[test]
fn the_scan_finds_the_brute_force_top_with_ties_by_id() {
    let ids: Vec<String> = (0..300).map(|i| format!("doc{i:04}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut v = vectors(&refs, 24, 7);
    // Rows 10 and 20 share a vector: a tie, broken by id.
    let copy = v.row(10).to_vec();
    v.data[20 * 24..21 * 24].copy_from_slice(&copy);
    let rows = Rows {
        address: (0..300).map(|i| Some(DocAddress::new(0, i))).collect(),
        lang: vec![0; 300],
        row_of: vec![(0..300).collect()],
        missing: 0,
    };
    let index = DenseIndex::new(v.clone());
    let query = v.row(10).to_vec();
    let mut brute: Vec<(f32, u32)> = (0..300)
        .map(|r| (dot(&query, v.row(r)), r as u32))
        .collect();
    brute.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (limit, skip) in [(10, 0), (5, 3), (300, 0), (10, 295), (10, 400)] {
        let (top, ranked) = index.nearest(&rows, &query, limit, skip, None);
        assert_eq!(ranked, 300);
        let want: Vec<(DocAddress, f32)> = brute
            .iter()
            .skip(skip)
            .take(limit)
            .map(|&(s, r)| (DocAddress::new(0, r), s))
            .collect();
        assert_eq!(top, want, "limit {limit} skip {skip}");
    }
    let (top, _) = index.nearest(&rows, &query, 2, 0, None);
    assert_eq!((top[0].0.doc_id, top[1].0.doc_id), (10, 20));
}
