//! The embedder on a tiny random-weight BERT written in the test (config, safetensors and a
//! WordPiece tokenizer), and on the real all-MiniLM-L6-v2 against the reference vectors of
//! sentence-transformers (`tests/fixtures/embed/`, written by `bench/embed_fixture.py`) when
//! that model is at hand.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device};
use candle_nn::{VarBuilder, VarMap};
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::bert::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer};

use super::*;

pub(crate) const WORDS: &[&str] = &[
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "how",
    "do",
    "i",
    "iterate",
    "over",
    "a",
    "hash",
    "##map",
    "sort",
    "vector",
    "in",
    "descending",
    "order",
    "the",
    "string",
    "##s",
];
const MAX_SEQ_LENGTH: usize = 16;

fn tiny_config(vocab_size: usize) -> serde_json::Value {
    serde_json::json!({
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": vocab_size,
        "hidden_size": 8,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 32,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0
    })
}

fn write_json(path: &Path, value: &serde_json::Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

/// A BERT-style tokenizer over `words` that pads every text to 128 tokens, as the
/// tokenizer.json shipped with all-MiniLM-L6-v2 does.
fn write_tokenizer(path: &Path, words: &[&str]) {
    let vocab = path.with_extension("vocab.txt");
    std::fs::write(&vocab, words.join("\n")).unwrap();
    let wordpiece = WordPiece::from_file(vocab.to_str().unwrap())
        .unk_token("[UNK]".into())
        .build()
        .unwrap();
    let mut tokenizer = Tokenizer::new(wordpiece);
    tokenizer
        .with_normalizer(Some(BertNormalizer::default()))
        .unwrap();
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    tokenizer.with_post_processor(Some(BertProcessing::new(
        ("[SEP]".into(), 3),
        ("[CLS]".into(), 2),
    )));
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::Fixed(128),
        ..PaddingParams::default()
    }));
    tokenizer.save(path, false).unwrap();
}

/// A complete tiny sentence-transformers directory with random weights.
pub(crate) fn tiny_model() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny_config(WORDS.len());
    write_json(&dir.path().join("config.json"), &config);
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let config: Config = serde_json::from_value(config).unwrap();
    BertModel::load(vb, &config).unwrap();
    varmap.save(dir.path().join("model.safetensors")).unwrap();
    write_tokenizer(&dir.path().join("tokenizer.json"), WORDS);
    write_json(
        &dir.path().join("modules.json"),
        &serde_json::json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        ]),
    );
    write_json(
        &dir.path().join("1_Pooling/config.json"),
        &serde_json::json!({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": true}),
    );
    write_json(
        &dir.path().join("sentence_bert_config.json"),
        &serde_json::json!({"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": false}),
    );
    dir
}

pub(super) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot = |x: &[f32], y: &[f32]| {
        x.iter()
            .zip(y)
            .map(|(p, q)| *p as f64 * *q as f64)
            .sum::<f64>()
    };
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

#[test]
fn a_tiny_model_embeds_into_unit_vectors_of_its_hidden_size() {
    let dir = tiny_model();
    let embedder = Embedder::load(dir.path()).unwrap();
    assert_eq!(embedder.dim(), 8);
    let v = embedder.embed("how do i iterate over a hashmap").unwrap();
    assert_eq!(v.len(), 8);
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
}

#[test]
fn a_query_is_not_padded_and_a_long_text_is_cut_at_max_seq_length() {
    let dir = tiny_model();
    let embedder = Embedder::load(dir.path()).unwrap();
    // [CLS] sort a vector [SEP], although tokenizer.json pads to 128.
    assert_eq!(
        embedder.token_ids("sort a vector").unwrap(),
        vec![2, 13, 10, 14, 3]
    );
    let long = "sort the vector in descending order ".repeat(10);
    let ids = embedder.token_ids(&long).unwrap();
    assert_eq!(ids.len(), MAX_SEQ_LENGTH);
    assert_eq!((ids[0], ids[MAX_SEQ_LENGTH - 1]), (2, 3));
}

/// Oracle: the mean pooling written out by hand over the transformer's own token vectors.
#[test]
fn mean_pooling_averages_the_token_vectors_of_the_text_only() {
    let dir = tiny_model();
    let embedder = Embedder::load(dir.path()).unwrap();
    let ids = embedder.token_ids("iterate over the strings").unwrap();
    let n = ids.len();
    let input = Tensor::from_vec(ids, (1, n), &Device::Cpu).unwrap();
    let tokens = embedder
        .model
        .forward(&input, &input.zeros_like().unwrap(), None)
        .unwrap()
        .to_vec3::<f32>()
        .unwrap();
    let mut mean = vec![0f64; 8];
    for token in &tokens[0] {
        for (m, x) in mean.iter_mut().zip(token) {
            *m += *x as f64 / n as f64;
        }
    }
    let norm = mean.iter().map(|x| x * x).sum::<f64>().sqrt();
    let got = embedder.embed("iterate over the strings").unwrap();
    for (g, m) in got.iter().zip(&mean) {
        assert!((*g as f64 - m / norm).abs() < 1e-5, "{got:?} vs {mean:?}");
    }
}

#[test]
fn a_batch_padded_to_its_longest_text_gives_each_texts_own_vector() {
    let dir = tiny_model();
    let embedder = Embedder::load(dir.path()).unwrap();
    let texts: Vec<String> = (0..40)
        .map(|i| {
            "sort the vector in descending order ".repeat(i % 4) + "how do i iterate over a hashmap"
        })
        .collect();
    let batch = embedder.embed_batch(&texts).unwrap();
    assert_eq!(batch.len(), texts.len());
    for (text, v) in texts.iter().zip(&batch) {
        let alone = embedder.embed(text).unwrap();
        assert!(cosine(v, &alone) > 0.99999, "{text}");
    }
}

fn load_error(dir: &Path) -> String {
    match Embedder::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_missing_or_corrupt_directory_is_an_error_naming_the_path() {
    let missing = PathBuf::from("/nonexistent/model");
    assert!(load_error(&missing).contains("/nonexistent/model"));

    for file in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "1_Pooling/config.json",
    ] {
        let dir = tiny_model();
        let path = dir.path().join(file);
        std::fs::remove_file(&path).unwrap();
        let message = load_error(dir.path());
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("missing"), "{message}");

        std::fs::write(&path, b"{ not what it should be").unwrap();
        let message = load_error(dir.path());
        assert!(message.contains(&path.display().to_string()), "{message}");
    }

    // Weights of another shape than config.json says.
    let dir = tiny_model();
    let mut config = tiny_config(WORDS.len());
    config["hidden_size"] = 12.into();
    write_json(&dir.path().join("config.json"), &config);
    write_json(
        &dir.path().join("1_Pooling/config.json"),
        &serde_json::json!({"word_embedding_dimension": 12, "pooling_mode_mean_tokens": true}),
    );
    let message = load_error(dir.path());
    assert!(message.contains("model.safetensors"), "{message}");
}

#[test]
fn a_tokenizer_with_more_tokens_than_the_model_is_refused() {
    let dir = tiny_model();
    let mut words = WORDS.to_vec();
    words.extend(["extra", "tokens", "beyond", "its", "table"]);
    write_tokenizer(&dir.path().join("tokenizer.json"), &words);
    let err = Embedder::load(dir.path()).err().expect("a mismatch");
    assert!(matches!(err, EmbedError::TokenizerMismatch { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("tokenizer.json"), "{message}");
    assert!(
        message.contains(&format!("{} tokens", words.len())),
        "{message}"
    );
}

#[test]
fn an_unsupported_pooling_mode_is_named() {
    let dir = tiny_model();
    write_json(
        &dir.path().join("1_Pooling/config.json"),
        &serde_json::json!({"pooling_mode_max_tokens": true}),
    );
    let message = load_error(dir.path());
    assert!(message.contains("pooling_mode_max_tokens"), "{message}");
    assert!(message.contains("1_Pooling/config.json"), "{message}");
}

/// The reference vectors of sentence-transformers for all-MiniLM-L6-v2.
#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<String>,
    embeddings: Vec<Vec<f32>>,
}

/// The real model: RANKD_EMBEDDER_DIR, else the cache; with RANKD_TEST_EMBEDDER=fetch (CI), the
/// default model is fetched into the cache when absent.
pub(super) fn real_model() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("RANKD_EMBEDDER_DIR") {
        return Some(PathBuf::from(dir));
    }
    if std::env::var("RANKD_TEST_EMBEDDER").as_deref() == Ok("fetch") {
        return Some(default_model::obtain().expect("the default model"));
    }
    default_model::cached()
}

#[test]
fn all_minilm_l6_v2_matches_sentence_transformers() {
    let Some(dir) = real_model() else {
        eprintln!(
            "skipped: all-MiniLM-L6-v2 is neither in the cache nor in RANKD_EMBEDDER_DIR \
             (RANKD_TEST_EMBEDDER=fetch fetches it)"
        );
        return;
    };
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/embed/all-MiniLM-L6-v2.json"
    );
    let reference: Reference =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(reference.texts.len() >= 20);
    let embedder = Embedder::load(&dir).unwrap();
    let batch = embedder.embed_batch(&reference.texts).unwrap();
    for ((text, expected), got) in reference
        .texts
        .iter()
        .zip(&reference.embeddings)
        .zip(&batch)
    {
        let alone = embedder.embed(text).unwrap();
        for v in [got, &alone] {
            let c = cosine(v, expected);
            assert!(c >= 0.9999, "cosine {c} for {text:?}");
        }
    }
}
