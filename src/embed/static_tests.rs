//! The static embedder against the Python `model2vec` package (`tests/fixtures/embed/model2vec/`,
//! written by `bench/static_embed_fixture.py`): inference on two tiny Model2Vec directories,
//! and distillation of all-MiniLM-L6-v2 when that model is at hand; the distillation's steps
//! on a tiny random BERT against the transformer embedder and against algebra; the loader's
//! errors.

use std::path::{Path, PathBuf};

use super::distill::{distill, zipf_sif_weights, DistillSettings, TableType};
use super::tests::{cosine, real_model, tiny_model, WORDS};
use super::{Embedder, StaticEmbedder};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/embed/model2vec")
}

#[derive(serde::Deserialize)]
struct Inference {
    texts: Vec<String>,
    models: std::collections::BTreeMap<String, Vec<Vec<f32>>>,
}

fn norm(v: &[f32]) -> f64 {
    v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt()
}

#[test]
fn tiny_models_embed_as_model2vec_does() {
    let path = fixtures().join("inference.json");
    let reference: Inference =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(reference.texts.len() >= 20);
    assert_eq!(reference.models.len(), 2);
    for (name, expected) in &reference.models {
        let model = StaticEmbedder::load(&fixtures().join(name)).unwrap();
        let batch = model.embed_batch(&reference.texts).unwrap();
        let mut zero = 0;
        for ((text, want), got) in reference.texts.iter().zip(expected).zip(&batch) {
            assert_eq!(
                got,
                &model.embed(text).unwrap(),
                "{name}: batch and alone, {text:?}"
            );
            if norm(want) == 0.0 {
                // No token of the text in the vocabulary (or only [UNK]): the zero vector.
                assert!(
                    got.iter().all(|&x| x == 0.0),
                    "{name}: {text:?} gave {got:?}"
                );
                zero += 1;
                continue;
            }
            let c = cosine(got, want);
            assert!(c >= 0.99999, "{name}: cosine {c} for {text:?}");
            if name == "tiny-float32" {
                // float32 in both programs: equal up to the order of the additions.
                let diff = got
                    .iter()
                    .zip(want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(diff <= 1e-6, "{name}: max |difference| {diff} for {text:?}");
            } else {
                // model2vec averages a float16 table in float16: its vectors' lengths are
                // float16-rounded.
                let ratio = norm(got) / norm(want);
                assert!(
                    (ratio - 1.0).abs() < 2e-3,
                    "{name}: length ratio {ratio} for {text:?}"
                );
            }
        }
        assert!(
            zero >= 2,
            "{name}: the fixture's empty and unknown-word texts"
        );
    }
    // One model normalises, the other not: the fixture checks config.json's `normalize`.
    let plain = StaticEmbedder::load(&fixtures().join("tiny-float32")).unwrap();
    let quantized = StaticEmbedder::load(&fixtures().join("tiny-quantized")).unwrap();
    assert!(plain.normalizes() && !quantized.normalizes());
}

/// Search reads unit vectors: a model that does not normalise (model2vec's `normalize:
/// false`) still gives `AnyEmbedder` its vectors divided by their norm, in the same
/// direction, and the zero vector of a text with no known word stays zero. (Before, `rankd
/// embed` with such a model wrote a vector file its own loader refused.)
#[test]
fn a_model_that_does_not_normalise_gives_search_unit_vectors() {
    let dir = fixtures().join("tiny-quantized");
    let raw = StaticEmbedder::load(&dir).unwrap();
    let any = super::AnyEmbedder::load(&dir).unwrap();
    let texts = [
        "how do i sort a vector",
        "read the file line by line",
        "zebra",
    ];
    let batch = any.embed_batch(&texts).unwrap();
    for (text, b) in texts.iter().zip(&batch) {
        let r = raw.embed(text).unwrap();
        let one = any.embed(text).unwrap();
        assert_eq!(&one, b, "{text}");
        let norm = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm == 0.0 {
            assert!(one.iter().all(|&x| x == 0.0), "{text}");
            continue;
        }
        assert!(
            (norm - 1.0).abs() > 1e-3,
            "{text}: the raw vector is not unit already"
        );
        let unit = one.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((unit - 1.0).abs() < 1e-5, "{text}: {unit}");
        for (x, y) in one.iter().zip(&r) {
            assert!((x * norm - y).abs() < 1e-5, "{text}");
        }
    }
}

#[test]
fn the_tiny_models_cut_texts_at_max_length_tokens() {
    // tiny-quantized's config.json says max_length 40; tiny-float32's nothing (512).
    let quantized = StaticEmbedder::load(&fixtures().join("tiny-quantized")).unwrap();
    let plain = StaticEmbedder::load(&fixtures().join("tiny-float32")).unwrap();
    let text = "sort the vector ".repeat(20);
    assert_eq!(plain.token_ids(&text).unwrap().len(), 60);
    assert!(quantized.token_ids(&text).unwrap().len() <= 40);
    // No special tokens, and the unknown token's ids are dropped.
    assert_eq!(plain.token_ids("zebra sort").unwrap().len(), 1);
}

fn load_error(dir: &Path) -> String {
    match StaticEmbedder::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

/// A copy of the tiny float32 model that the test may damage.
fn tiny_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(
            fixtures().join("tiny-float32").join(name),
            dir.path().join(name),
        )
        .unwrap();
    }
    dir
}

fn write_table(path: &Path, tensors: Vec<(&str, safetensors::Dtype, Vec<usize>, Vec<u8>)>) {
    let views: Vec<(&str, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes).unwrap();
            (*name, view)
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

fn f32_bytes(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect()
}

#[test]
fn a_missing_or_corrupt_directory_is_an_error_naming_the_path() {
    let dir = tiny_copy();
    let nowhere = dir.path().join("nowhere");
    let e = load_error(&nowhere);
    assert!(
        e.contains("nowhere") && e.contains("not a directory"),
        "{e}"
    );
    assert!(e.contains("Model2Vec"), "{e}");

    for name in ["config.json", "model.safetensors", "tokenizer.json"] {
        let dir = tiny_copy();
        std::fs::remove_file(dir.path().join(name)).unwrap();
        let e = load_error(dir.path());
        assert!(e.contains(name) && e.contains("missing"), "{name}: {e}");
    }

    let dir = tiny_copy();
    std::fs::write(
        dir.path().join("model.safetensors"),
        b"not safetensors at all",
    )
    .unwrap();
    let e = load_error(dir.path());
    assert!(
        e.contains("model.safetensors") && e.contains("not a safetensors file"),
        "{e}"
    );

    let dir = tiny_copy();
    std::fs::write(dir.path().join("tokenizer.json"), b"{\"model\": 3}").unwrap();
    let e = load_error(dir.path());
    assert!(
        e.contains("tokenizer.json") && e.contains("not a tokenizer"),
        "{e}"
    );

    let dir = tiny_copy();
    std::fs::write(dir.path().join("config.json"), b"{\"normalize\": \"yes\"}").unwrap();
    let e = load_error(dir.path());
    assert!(
        e.contains("config.json") && e.contains("not the Model2Vec configuration"),
        "{e}"
    );

    let dir = tiny_copy();
    let table = dir.path().join("model.safetensors");
    write_table(
        &table,
        vec![(
            "vectors",
            safetensors::Dtype::F32,
            vec![64, 8],
            f32_bytes(512),
        )],
    );
    let e = load_error(dir.path());
    assert!(
        e.contains("model.safetensors") && e.contains("no `embeddings` tensor"),
        "{e}"
    );

    write_table(
        &table,
        vec![(
            "embeddings",
            safetensors::Dtype::F32,
            vec![512],
            f32_bytes(512),
        )],
    );
    let e = load_error(dir.path());
    assert!(
        e.contains("model.safetensors") && e.contains("not rows × dim"),
        "{e}"
    );

    let bytes: Vec<u8> = (0..512u32).flat_map(|i| i.to_le_bytes()).collect();
    write_table(
        &table,
        vec![("embeddings", safetensors::Dtype::U32, vec![64, 8], bytes)],
    );
    let e = load_error(dir.path());
    assert!(
        e.contains("model.safetensors") && e.contains("U32") && e.contains("not supported"),
        "{e}"
    );
}

#[test]
fn a_tokenizer_with_more_tokens_than_the_table_is_refused() {
    let dir = tiny_copy();
    let table = dir.path().join("model.safetensors");
    // 63 rows for a 64-token vocabulary.
    write_table(
        &table,
        vec![(
            "embeddings",
            safetensors::Dtype::F32,
            vec![63, 8],
            f32_bytes(504),
        )],
    );
    let e = load_error(dir.path());
    assert!(
        e.contains("tokenizer.json") && e.contains("64 tokens") && e.contains("63"),
        "{e}"
    );

    // With vocabulary quantization: a mapping shorter than the vocabulary, a row past the table.
    let mapping = |rows: Vec<i64>| {
        rows.iter()
            .flat_map(|r| r.to_le_bytes())
            .collect::<Vec<u8>>()
    };
    let embeddings = (
        "embeddings",
        safetensors::Dtype::F32,
        vec![4, 8],
        f32_bytes(32),
    );
    write_table(
        &table,
        vec![
            embeddings.clone(),
            (
                "mapping",
                safetensors::Dtype::I64,
                vec![10],
                mapping(vec![0; 10]),
            ),
        ],
    );
    let e = load_error(dir.path());
    assert!(
        e.contains("tokenizer.json") && e.contains("64 tokens") && e.contains("10"),
        "{e}"
    );
    let mut rows = vec![0i64; 64];
    rows[7] = 4;
    write_table(
        &table,
        vec![
            embeddings,
            ("mapping", safetensors::Dtype::I64, vec![64], mapping(rows)),
        ],
    );
    let e = load_error(dir.path());
    assert!(
        e.contains("model.safetensors") && e.contains("outside the 4 rows"),
        "{e}"
    );
}

#[test]
fn zipf_sif_weights_are_model2vecs() {
    // n = 3, a = 0.5: p = (1/2, 1/3, 1/4) / (13/12) = (6/13, 4/13, 3/13); w = a / (a + p).
    let w: Vec<f32> = zipf_sif_weights(3, 0.5).collect();
    let expected = [
        0.5 / (0.5 + 6.0 / 13.0),
        0.5 / (0.5 + 4.0 / 13.0),
        0.5 / (0.5 + 3.0 / 13.0),
    ];
    for (got, want) in w.iter().zip(expected) {
        assert!((*got as f64 - want).abs() < 1e-7, "{w:?}");
    }
}

/// The tiny BERT's whole-word tokens (no `##` continuation, no special token).
fn words() -> Vec<&'static str> {
    WORDS
        .iter()
        .copied()
        .filter(|w| !w.starts_with('[') && !w.starts_with("##"))
        .collect()
}

fn unweighted() -> DistillSettings {
    DistillSettings {
        pca_dims: None,
        sif_coefficient: None,
        token_remove_pattern: Some(r"\[unused\d+\]".into()),
        table_type: TableType::F32,
    }
}

#[test]
fn without_pca_and_weights_a_tokens_row_is_the_transformers_vector_of_the_token() {
    let model = tiny_model();
    let embedder = Embedder::load(model.path()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("static");
    let mut calls = Vec::new();
    let distilled = distill(&embedder, &dir, &unweighted(), |done, total| {
        calls.push((done, total))
    })
    .unwrap();
    // The tiny tokenizer declares no added tokens: its 21 tokens all stay (model2vec prunes
    // only added tokens).
    assert_eq!((distilled.tokens, distilled.dim), (WORDS.len(), 8));
    assert_eq!(calls, vec![(WORDS.len(), WORDS.len())]);
    let model = StaticEmbedder::load(&dir).unwrap();
    assert!(model.normalizes());
    // The transformer embeds a one-token word as the mean over [CLS] word [SEP], normalised:
    // the static model's row for that token, normalised.
    for word in words() {
        let c = cosine(&model.embed(word).unwrap(), &embedder.embed(word).unwrap());
        assert!(c > 0.99999, "cosine {c} for {word:?}");
    }
    // A two-token word is the mean of its two rows (read from the table itself: the tiny
    // model's weights are random, so no fixed similarity between the rows can be assumed).
    let hashmap = model.embed("hashmap").unwrap();
    let ids = model.token_ids("hashmap").unwrap();
    assert_eq!(ids.len(), 2);
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let table = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let rows = table.tensor("embeddings").unwrap();
    assert_eq!(rows.dtype(), safetensors::Dtype::F32);
    let floats: Vec<f32> = rows
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let row = |id: u32| &floats[id as usize * 8..(id as usize + 1) * 8];
    let mean: Vec<f32> = row(ids[0])
        .iter()
        .zip(row(ids[1]))
        .map(|(a, b)| (a + b) / 2.0)
        .collect();
    let c = cosine(&hashmap, &mean);
    assert!(c > 0.99999, "cosine {c}");

    let e = distill(&embedder, &dir, &unweighted(), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("static") && e.contains("exists already"), "{e}");
}

/// The stored rows of a distilled directory, as float32.
fn table(dir: &Path) -> (Vec<f32>, usize) {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let t = file.tensor("embeddings").unwrap();
    assert_eq!(t.dtype(), safetensors::Dtype::F32);
    let rows = t
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (rows, t.shape()[1])
}

fn gram(rows: &[f32], dim: usize) -> Vec<f64> {
    let n = rows.len() / dim;
    let row = |i: usize| &rows[i * dim..(i + 1) * dim];
    (0..n)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .map(|(i, j)| {
            row(i)
                .iter()
                .zip(row(j))
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum()
        })
        .collect()
}

#[test]
fn pca_rotates_the_centred_vectors_and_keeps_the_components_of_most_variance() {
    let model = tiny_model();
    let embedder = Embedder::load(model.path()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let raw_dir = out.path().join("raw");
    distill(&embedder, &raw_dir, &unweighted(), |_, _| {}).unwrap();
    let (raw, d) = table(&raw_dir);
    let n = raw.len() / d;
    let mut centred = raw.clone();
    for j in 0..d {
        let mean = (0..n).map(|i| raw[i * d + j] as f64).sum::<f64>() / n as f64;
        (0..n).for_each(|i| centred[i * d + j] -= mean as f32);
    }

    // All 8 components: a rotation of the centred vectors, whose dot products it keeps.
    let full_dir = out.path().join("full");
    let settings = DistillSettings {
        pca_dims: Some(8),
        ..unweighted()
    };
    let full = distill(&embedder, &full_dir, &settings, |_, _| {}).unwrap();
    assert!((full.explained_variance - 1.0).abs() < 1e-9);
    let (rotated, k) = table(&full_dir);
    assert_eq!(k, 8);
    let (a, b) = (gram(&centred, d), gram(&rotated, k));
    let scale = a.iter().fold(0f64, |m, x| m.max(x.abs()));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-5 * scale, "{x} vs {y}");
    }
    // Components in decreasing variance, each signed so that its largest score is positive.
    let columns = &rotated;
    let column = |j: usize| (0..n).map(move |i| columns[i * k + j] as f64);
    let variances: Vec<f64> = (0..k).map(|j| column(j).map(|x| x * x).sum()).collect();
    assert!(
        variances.windows(2).all(|w| w[0] >= w[1] * (1.0 - 1e-6)),
        "{variances:?}"
    );
    for j in 0..k {
        let largest = column(j).fold(0f64, |m, x| if x.abs() > m.abs() { x } else { m });
        assert!(largest > 0.0, "component {j}");
    }

    // 3 components: the first 3 columns of the full rotation, and their share of variance.
    let three_dir = out.path().join("three");
    let settings = DistillSettings {
        pca_dims: Some(3),
        ..unweighted()
    };
    let three = distill(&embedder, &three_dir, &settings, |_, _| {}).unwrap();
    let (reduced, k3) = table(&three_dir);
    assert_eq!((three.dim, k3), (3, 3));
    for i in 0..n {
        for j in 0..3 {
            let (x, y) = (reduced[i * 3 + j], rotated[i * 8 + j]);
            assert!(
                (x - y).abs() <= 1e-5 * (scale as f32).sqrt(),
                "row {i} column {j}"
            );
        }
    }
    let share = variances[..3].iter().sum::<f64>() / variances.iter().sum::<f64>();
    assert!(
        (three.explained_variance - share).abs() < 1e-5,
        "{three:?} vs {share}"
    );

    // With the SIF weights: each row of the rotation times its token's weight.
    let weighted_dir = out.path().join("weighted");
    let settings = DistillSettings {
        pca_dims: Some(8),
        sif_coefficient: Some(0.05),
        ..unweighted()
    };
    distill(&embedder, &weighted_dir, &settings, |_, _| {}).unwrap();
    let (weighted, _) = table(&weighted_dir);
    for (i, w) in zipf_sif_weights(n, 0.05).enumerate() {
        for j in 0..8 {
            let (x, y) = (weighted[i * 8 + j], rotated[i * 8 + j] * w);
            assert!(
                (x - y).abs() <= 1e-6 * (scale as f32).sqrt(),
                "row {i} column {j}"
            );
        }
    }
}

#[derive(serde::Deserialize)]
struct Distilled {
    vocabulary: usize,
    dim: usize,
    texts: Vec<String>,
    embeddings: Vec<Vec<f32>>,
}

/// Cosine similarity of every pair of vectors.
fn similarities(vectors: &[Vec<f32>]) -> Vec<f64> {
    vectors
        .iter()
        .flat_map(|a| vectors.iter().map(move |b| cosine(a, b)))
        .collect()
}

#[test]
fn all_minilm_l6_v2_distils_as_model2vec_does() {
    let Some(source) = real_model() else {
        eprintln!(
            "skipped: all-MiniLM-L6-v2 is neither in the cache nor in RANKD_EMBEDDER_DIR \
             (RANKD_TEST_EMBEDDER=fetch fetches it)"
        );
        return;
    };
    let path = fixtures().join("distilled-all-MiniLM-L6-v2.json");
    let reference: Distilled =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(reference.texts.len() >= 50);
    let embedder = Embedder::load(&source).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("static");
    let distilled = distill(&embedder, &dir, &DistillSettings::default(), |_, _| {}).unwrap();
    assert_eq!(
        (distilled.tokens, distilled.dim),
        (reference.vocabulary, reference.dim)
    );
    let model = StaticEmbedder::load(&dir).unwrap();
    let ours = model.embed_batch(&reference.texts).unwrap();
    // Per text: the same vector, up to float16 storage and float32 (model2vec) against float64
    // (here) covariance and eigenvectors.
    let mut lowest = f64::INFINITY;
    for ((text, a), b) in reference.texts.iter().zip(&ours).zip(&reference.embeddings) {
        let c = cosine(a, b);
        assert!(c >= STATIC_TEXT_COSINE, "cosine {c} for {text:?}");
        lowest = lowest.min(c);
    }
    // Invariant to the components' signs and to rotations among components of equal variance:
    // the texts' pairwise similarities.
    let diff = similarities(&ours)
        .iter()
        .zip(similarities(&reference.embeddings))
        .map(|(a, b)| (a - b).abs())
        .fold(0f64, f64::max);
    assert!(
        diff <= STATIC_SIMILARITY_DIFF,
        "max |similarity difference| {diff}"
    );
    eprintln!(
        "distilled as model2vec: lowest cosine {lowest:.7}, max |similarity difference| {diff:.2e}"
    );
}

/// Tolerances of the distillation against model2vec's (docs/EVALUATION.md).
const STATIC_TEXT_COSINE: f64 = 0.9999;
const STATIC_SIMILARITY_DIFF: f64 = 5e-4;
