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
    let rows = Rows::counted(
        (0..300).map(|i| Some(DocAddress::new(0, i))).collect(),
        vec![0; 300],
        0,
    );
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

/// `n` random unit vectors of `dim` floats, ids in row order.
fn random_vectors(n: usize, dim: usize, seed: u64) -> Vectors {
    let ids: Vec<String> = (0..n).map(|i| format!("doc{i:07}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    vectors(&refs, dim, seed)
}

/// The exact scan's answer to `nearest` (what the index answers below the graph's threshold).
fn exact(
    index: &DenseIndex,
    rows: &Rows,
    query: &[f32],
    limit: usize,
    lang: Option<u64>,
) -> Vec<(DocAddress, f32)> {
    let (top, _) = scan(&index.vectors, query, limit, |row| {
        rows.address[row].is_some() && lang.is_none_or(|l| rows.lang[row] == l)
    });
    top.into_iter()
        .map(|(s, row)| (rows.address[row as usize].unwrap(), s))
        .collect()
}

fn recall(found: &[(DocAddress, f32)], truth: &[(DocAddress, f32)]) -> f64 {
    let hits = found
        .iter()
        .filter(|(a, _)| truth.iter().any(|(b, _)| a == b))
        .count();
    hits as f64 / truth.len() as f64
}

#[test]
fn above_the_threshold_the_graph_finds_the_exact_top_ten_with_recall_over_098() {
    // A lowered threshold (production's, `ann::min_rows`, is 600,000 rows of 32 floats).
    let threshold = 20_000;
    let n = threshold + 2_000;
    let v = random_vectors(n, 32, 11);
    let queries = random_vectors(200, 32, 12);
    // A third of the documents deleted; the rest alternate between two languages.
    let rows = Rows::counted(
        (0..n as u32)
            .map(|i| (!i.is_multiple_of(3)).then(|| DocAddress::new(0, i)))
            .collect(),
        (0..n as u64).map(|i| 1 + i % 2).collect(),
        0,
    );
    let index = DenseIndex::without_graph(v).with_min_rows(threshold);
    index.build_graph();
    let graph = index.graph().expect("a graph from the threshold on");
    let live = |row: usize| rows.address[row].is_some();
    let in_lang = |row: usize| live(row) && rows.lang[row] == 2;
    // The graph's own answers (short ones count their missing rows as misses), not
    // `nearest`'s, which the exact scan completes.
    let graph_recall = |query: &[f32], allowed: &dyn Fn(usize) -> bool| {
        let found = graph.search(&index.vectors, query, 10, allowed);
        let (truth, _) = scan(&index.vectors, query, 10, allowed);
        let hits = found
            .iter()
            .filter(|f| truth.iter().any(|t| t.1 == f.1))
            .count();
        hits as f64 / 10.0
    };
    let (mut all, mut filtered) = (0.0, 0.0);
    for q in 0..queries.len() {
        let query = queries.row(q);
        all += graph_recall(query, &live);
        filtered += graph_recall(query, &in_lang);
        let (top, ranked) = index.nearest(&rows, query, 10, 0, None);
        assert_eq!(ranked, rows.live());
        assert_eq!(top.len(), 10);
        for (address, score) in &top {
            assert!(
                !address.doc_id.is_multiple_of(3),
                "deleted document {address:?} returned"
            );
            assert_eq!(
                *score,
                dot(query, index.vectors.row(address.doc_id as usize))
            );
        }
        assert!(top.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
        assert!(recall(&top, &exact(&index, &rows, query, 10, None)) >= 0.5);
        // Languages: half the live documents each, still above the threshold.
        let (top, ranked) = index.nearest(&rows, query, 10, 0, Some(2));
        assert_eq!(ranked, rows.live_in(Some(2)));
        assert_eq!(top.len(), 10);
        assert!(top
            .iter()
            .all(|(a, _)| !a.doc_id.is_multiple_of(3) && a.doc_id % 2 == 1));
    }
    // A filter that allows 6 rows: fewer than asked for, which `nearest`
    // answers by the exact scan instead; never a row the filter refuses.
    let few = graph.search(&index.vectors, queries.row(0), 10, |row| row % 10_000 == 7);
    assert!(few.len() < 10 && few.iter().all(|&(_, row)| row % 10_000 == 7));
    let (all, filtered) = (all / 200.0, filtered / 200.0);
    assert!(all >= 0.98, "recall@10 {all}");
    assert!(filtered >= 0.98, "recall@10 in one language {filtered}");
}

#[test]
fn the_exact_scan_answers_below_the_threshold_before_the_graph_deep_pages_and_small_languages() {
    // Below the threshold: no graph, the exact scan.
    // Production's threshold for 384 floats, and a lowered one for the 8 floats here (else
    // 2.4 million rows).
    assert_eq!(ann::min_rows(384), 50_000);
    let threshold = 20_000;
    let small =
        DenseIndex::without_graph(random_vectors(threshold - 1, 8, 21)).with_min_rows(threshold);
    small.build_graph();
    assert!(small.graph().is_none());
    // Above it: a language with fewer documents than the threshold, and a page past the most
    // the graph is asked for, are answered by the exact scan, identically.
    let n = threshold + 500;
    let rows = Rows::counted(
        (0..n as u32).map(|i| Some(DocAddress::new(0, i))).collect(),
        (0..n as u64)
            .map(|i| if i.is_multiple_of(50) { 7 } else { 1 })
            .collect(),
        0,
    );
    let queries = random_vectors(20, 8, 23);
    // Installed without its graph (as the embedding job does first): the exact scan answers.
    let index = DenseIndex::without_graph(random_vectors(n, 8, 22)).with_min_rows(threshold);
    assert!(index.graph().is_none());
    let (top, _) = index.nearest(&rows, queries.row(0), 10, 0, None);
    assert_eq!(top, exact(&index, &rows, queries.row(0), 10, None));
    index.build_graph();
    assert!(index.graph().is_some());
    for q in 0..queries.len() {
        let query = queries.row(q);
        let (top, ranked) = index.nearest(&rows, query, 10, 0, Some(7));
        assert_eq!(ranked, n.div_ceil(50));
        assert_eq!(top, exact(&index, &rows, query, 10, Some(7)));
        let (top, _) = index.nearest(&rows, query, 10, ann::MAX_WANT, None);
        let deep = exact(&index, &rows, query, ann::MAX_WANT + 10, None);
        assert_eq!(top, deep[ann::MAX_WANT..]);
        let (top, _) = small.nearest(&rows_of(&small), query, 10, 0, None);
        assert_eq!(top, exact(&small, &rows_of(&small), query, 10, None));
    }
}

/// Every row of `index` live, in no language.
fn rows_of(index: &DenseIndex) -> Rows {
    let n = index.vectors.len();
    Rows::counted(
        (0..n as u32).map(|i| Some(DocAddress::new(0, i))).collect(),
        vec![0; n],
        0,
    )
}

/// An index over `v` that keeps its graph in `path`, from 1,000 rows (tests need not build
/// 50,000), its graph loaded or built.
fn with_graph_file(v: &Vectors, path: &Path) -> DenseIndex {
    let index = DenseIndex::without_graph(v.clone())
        .with_graph_file(path.to_path_buf())
        .with_min_rows(1_000);
    index.build_graph();
    index
}

#[test]
fn a_saved_graph_is_loaded_and_answers_as_the_graph_saved() {
    let dir = tempfile::tempdir().unwrap();
    let path = ann::path(dir.path());
    let v = random_vectors(3_000, 16, 31);
    let built = with_graph_file(&v, &path);
    let first = built.graph().expect("a graph from the lowered threshold");
    assert_eq!(first.origin(), ann::Origin::Built);
    assert!(path.exists(), "the graph is saved");
    let loaded = with_graph_file(&v, &path);
    let second = loaded.graph().expect("a graph");
    assert_eq!(second.origin(), ann::Origin::Loaded);
    // The very graph: usearch serialises both alike, and they answer alike, filtered or not.
    assert!(
        first.to_bytes() == second.to_bytes(),
        "another graph was loaded"
    );
    let rows = rows_of(&built);
    let queries = random_vectors(50, 16, 32);
    for q in 0..queries.len() {
        let query = queries.row(q);
        let filters: [fn(usize) -> bool; 2] = [|_| true, |row| row % 3 == 1];
        for allowed in filters {
            assert_eq!(
                first.search(&v, query, 10, allowed),
                second.search(&v, query, 10, allowed)
            );
        }
        assert_eq!(
            built.nearest(&rows, query, 20, 5, None),
            loaded.nearest(&rows, query, 20, 5, None)
        );
    }
}

#[test]
fn a_graph_saved_from_other_vectors_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let path = ann::path(dir.path());
    let old = random_vectors(3_000, 16, 33);
    with_graph_file(&old, &path);
    // One row changed (the embedding job re-embedded one document): the saved graph is stale.
    let mut new = old.clone();
    let other = random_vectors(1, 16, 34);
    new.data[..16].copy_from_slice(other.row(0));
    let e = ann::Ann::load(&path, &new, &ann::vectors_sha256(&new))
        .err()
        .expect("a stale graph is refused");
    assert!(e.to_string().contains("vectors.graph"), "{e}");
    let rebuilt = with_graph_file(&new, &path);
    assert_eq!(rebuilt.graph().unwrap().origin(), ann::Origin::Built);
    // Saved again, for the new vectors: now loaded for them, and stale for the old ones.
    assert_eq!(
        with_graph_file(&new, &path).graph().unwrap().origin(),
        ann::Origin::Loaded
    );
    assert_eq!(
        with_graph_file(&old, &path).graph().unwrap().origin(),
        ann::Origin::Built
    );
    // Fewer rows, the same first ones: stale too.
    let fewer = Vectors {
        ids: old.ids[..2_000].to_vec(),
        text_hashes: old.text_hashes[..2_000].to_vec(),
        data: old.data[..2_000 * 16].to_vec(),
        ..old.clone()
    };
    assert_eq!(
        with_graph_file(&fewer, &path).graph().unwrap().origin(),
        ann::Origin::Built
    );
}

#[test]
fn a_damaged_graph_file_is_rebuilt_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = ann::path(dir.path());
    let v = random_vectors(3_000, 16, 35);
    with_graph_file(&v, &path);
    let good = std::fs::read(&path).unwrap();
    let newline = good.iter().position(|&b| b == b'\n').unwrap();
    let mut flipped = good.clone();
    flipped[newline + good.len() / 2] ^= 0x5a;
    let damaged: [(&str, Vec<u8>); 5] = [
        ("truncated", good[..good.len() / 2].to_vec()),
        ("header only", good[..newline + 1].to_vec()),
        ("a flipped byte", flipped),
        (
            "garbage",
            (0..200_000u32).map(|i| (i * 7 + 3) as u8).collect(),
        ),
        ("empty", Vec::new()),
    ];
    for (what, bytes) in damaged {
        std::fs::write(&path, &bytes).unwrap();
        let e = ann::Ann::load(&path, &v, &ann::vectors_sha256(&v))
            .err()
            .unwrap_or_else(|| panic!("{what}: loaded"));
        assert!(e.to_string().contains("vectors.graph"), "{what}: {e}");
        let index = with_graph_file(&v, &path);
        assert_eq!(
            index.graph().unwrap().origin(),
            ann::Origin::Built,
            "{what}"
        );
        // ... and saved whole again.
        assert_eq!(
            with_graph_file(&v, &path).graph().unwrap().origin(),
            ann::Origin::Loaded,
            "{what}"
        );
    }
}

/// A data directory whose index holds `docs` and whose vectors the tiny test model
/// (`crate::embed::tests::tiny_model`) computed; the model's directory is returned too (its
/// fingerprint is the vectors'). For other modules' tests.
pub(crate) fn indexed_with_vectors(
    docs: impl IntoIterator<Item = crate::corpus::Document>,
) -> (tempfile::TempDir, tempfile::TempDir, crate::text::TextIndex) {
    let model = crate::embed::tests::tiny_model();
    let dir = tempfile::tempdir().unwrap();
    let index = crate::text::TextIndex::open_or_create(dir.path(), None).unwrap();
    index.upsert(docs).unwrap();
    let embedder = crate::embed::AnyEmbedder::load(model.path()).unwrap();
    super::build::update(
        dir.path(),
        &index,
        &embedder,
        super::DocText::DEFAULT,
        &mut |w| panic!("{w}"),
        &mut |_, _| {},
    )
    .unwrap();
    (model, dir, index)
}
