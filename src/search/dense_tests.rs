//! Dense and hybrid search end to end on a tiny random-weight model (`crate::dense`): the
//! engine's ranking against brute force over the embedder, deletions, the fusion's inputs and
//! explanations, a missing or damaged vector file, the embedding job.

use std::sync::Arc;

use crate::dense::{build, dot, job, load, store, DocText, Progress};
use crate::text::TextIndex;

/// The vectors of `index` (in `dir`) brought up to date by `embedder`, with no warning.
fn update(
    dir: &std::path::Path,
    index: &TextIndex,
    embedder: &crate::embed::AnyEmbedder,
) -> (crate::dense::Vectors, build::BuildReport) {
    build::update(
        dir,
        index,
        embedder,
        DocText::DEFAULT,
        &mut |w| panic!("{w}"),
        &mut |_, _| {},
    )
    .unwrap()
}

/// An index of documents written in the tiny model's words, its vectors computed, served by
/// an engine.
fn served() -> (
    tempfile::TempDir,
    tempfile::TempDir,
    crate::search::Engine,
    Vec<(String, String)>,
) {
    use crate::corpus::Document;
    let model = crate::embed::tests::tiny_model();
    let data = tempfile::tempdir().unwrap();
    let index = TextIndex::open_or_create(data.path(), None).unwrap();
    let words = &crate::embed::tests::WORDS[5..];
    let docs: Vec<Document> = (0..30)
        .map(|i| Document {
            id: format!("d{i:02}"),
            title: format!(
                "{} {}",
                words[i % words.len()],
                words[(i * 7 + 3) % words.len()]
            ),
            body: format!(
                "{} {} {}.",
                words[(i * 3) % words.len()],
                words[(i + 5) % words.len()],
                words[(i * 11) % words.len()]
            ),
            ..Default::default()
        })
        .collect();
    index.upsert(docs).unwrap();
    let embedder = crate::embed::AnyEmbedder::load(model.path()).unwrap();
    let (vectors, report) = update(data.path(), &index, &embedder);
    assert_eq!((report.vectors, report.embedded), (30, 30));
    assert_eq!(vectors.len(), 30);
    let searcher = index.reader.searcher();
    let texts = build::documents(&index, &searcher, DocText::DEFAULT).unwrap();
    let engine = crate::search::Engine::new(index);
    engine.set_dense(Some(Arc::new(load(&engine.index, None).unwrap().unwrap())));
    (model, data, engine, texts)
}

fn search(
    engine: &crate::search::Engine,
    params: serde_json::Value,
) -> crate::search::SearchResponse {
    let request: crate::search::request::SearchRequest = serde_json::from_value(params).unwrap();
    let reranker_active = engine.model().is_some();
    engine
        .search(&request.into_query(reranker_active).unwrap())
        .unwrap()
}

#[test]
fn dense_search_ranks_as_brute_force_over_the_embedder_and_follows_deletions() {
    let (model, _data, engine, texts) = served();
    let embedder = crate::embed::AnyEmbedder::load(model.path()).unwrap();
    let query = "how do i sort a vector in descending order";
    // The oracle: every document's text embedded anew, dot products sorted (ties by id).
    let q = embedder.embed(query).unwrap();
    let mut brute: Vec<(f32, String)> = texts
        .iter()
        .map(|(id, text)| (dot(&q, &embedder.embed(text).unwrap()), id.clone()))
        .collect();
    brute.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let r = search(
        &engine,
        serde_json::json!({"q": query, "model": "dense", "k": 10, "collapse": "none"}),
    );
    assert_eq!(r.model, "dense");
    assert_eq!(r.total_hits, 30);
    let got: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
    let want: Vec<&str> = brute.iter().take(10).map(|(_, id)| id.as_str()).collect();
    assert_eq!(got, want);
    for (h, (s, _)) in r.hits.iter().zip(&brute) {
        assert!((h.score - s).abs() < 1e-5, "{} vs {s}", h.score);
    }
    // A deleted document is never a hit, before the vectors are recomputed.
    let gone = got[0].to_string();
    engine.index.delete(std::slice::from_ref(&gone)).unwrap();
    let r = search(
        &engine,
        serde_json::json!({"q": query, "model": "dense", "k": 30, "collapse": "none"}),
    );
    assert_eq!(r.hits.len(), 29);
    assert!(r.hits.iter().all(|h| h.id != gone));
    // The next run drops its vector and embeds nothing else.
    let (_, report) = update(&engine.index.dir, &engine.index, &embedder);
    assert_eq!(
        (
            report.vectors,
            report.embedded,
            report.reused,
            report.dropped
        ),
        (29, 0, 29, 1)
    );
}

#[test]
fn hybrid_fuses_bm25f_and_dense_and_explains_both() {
    let (_model, _data, engine, _) = served();
    let r = search(
        &engine,
        serde_json::json!({"q": "hash map string", "model": "hybrid", "k": 5, "explain": true,
                           "collapse": "none"}),
    );
    assert_eq!(r.model, "hybrid");
    let report = r.fusion.as_ref().unwrap();
    let inputs: Vec<&str> = report.inputs.iter().map(|i| i.model.as_str()).collect();
    assert_eq!(inputs, ["bm25f", "dense"]);
    let explained = r.hits[0].explain.as_ref().unwrap();
    let listed = explained.fusion_inputs.as_ref().unwrap();
    assert_eq!(listed[1].model, "dense");
    assert!(listed[1].rank.is_some());
    // hybrid_ratio 1 is the dense list alone; 0 is BM25F's order first.
    let dense_only = search(
        &engine,
        serde_json::json!({"q": "hash map string", "model": "dense", "k": 5, "collapse": "none"}),
    );
    let all_dense = search(
        &engine,
        serde_json::json!({"q": "hash map string", "model": "hybrid", "hybrid_ratio": 1.0,
                           "fusion": "linear", "k": 5, "collapse": "none"}),
    );
    let ids = |r: &crate::search::SearchResponse| -> Vec<String> {
        r.hits.iter().map(|h| h.id.clone()).collect()
    };
    assert_eq!(ids(&dense_only), ids(&all_dense));
    // A question of stop words only still has dense neighbours.
    let r = search(
        &engine,
        serde_json::json!({"q": "how do i", "model": "hybrid", "k": 3, "collapse": "none"}),
    );
    assert_eq!(r.hits.len(), 3);
}

#[test]
fn without_vectors_dense_is_unavailable_and_a_damaged_file_is_named_while_text_models_serve() {
    let (_model, data, engine, _) = served();
    let lexical = serde_json::json!({"q": "vector", "model": "bm25f", "k": 3});
    engine.set_dense(None);
    let request: crate::search::request::SearchRequest =
        serde_json::from_value(serde_json::json!({"q": "vector", "model": "dense"})).unwrap();
    match engine.search(&request.into_query(false).unwrap()) {
        Err(crate::search::SearchError::Unavailable(m)) => {
            assert!(m.contains("rankd embed"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    let path = store::path(data.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let e = load(&engine.index, None).err().unwrap().to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(!search(&engine, lexical).hits.is_empty());
}

#[test]
fn the_job_serves_stored_vectors_and_embeds_added_documents() {
    let (model, _data, engine, _) = served();
    engine.set_dense(None);
    engine
        .index
        .upsert([crate::corpus::Document {
            id: "new".into(),
            title: "descending string".into(),
            body: "sort the strings.".into(),
            ..Default::default()
        }])
        .unwrap();
    let options = job::JobOptions {
        embedder: Some(model.path().to_path_buf()),
        poll: std::time::Duration::from_millis(1),
        ..Default::default()
    };
    let installs = std::sync::atomic::AtomicUsize::new(0);
    let polls = std::sync::atomic::AtomicUsize::new(0);
    job::run(
        &engine.index,
        &engine.dense_status,
        &options,
        &|d| {
            installs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            engine.set_dense(Some(d));
        },
        // Two looks at the index: the first run, then no change.
        &|| polls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 2,
    );
    // The stored 30, then the 31 after the run that embedded the new document.
    assert_eq!(installs.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(engine.dense_status.get(), Progress::Ready { vectors: 31 });
    let r = search(
        &engine,
        serde_json::json!({"q": "descending string", "model": "dense", "k": 31, "collapse": "none"}),
    );
    assert!(r.hits.iter().any(|h| h.id == "new"));
}

#[test]
fn static_embeddings_serve_dense_search_and_a_text_without_known_words_has_no_vector() {
    use crate::corpus::Document;
    let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/embed/model2vec/tiny-float32");
    let embedder = crate::embed::AnyEmbedder::load(&model).unwrap();
    assert!(matches!(embedder, crate::embed::AnyEmbedder::Static(_)));
    let data = tempfile::tempdir().unwrap();
    let index = TextIndex::open_or_create(data.path(), None).unwrap();
    let texts = [
        ("a", "sort vector", "sort the vector in descending order."),
        ("b", "read file", "read a file line by line."),
        ("c", "thread spawn", "spawn a thread and wait for it."),
        ("d", "hash map", "iterate over a hash map."),
        ("e", "∑ ∏", "∑∑∑ ∏∏∏"),
    ];
    index
        .upsert(texts.iter().map(|(id, title, body)| Document {
            id: id.to_string(),
            title: title.to_string(),
            body: body.to_string(),
            ..Default::default()
        }))
        .unwrap();
    let (vectors, report) = update(data.path(), &index, &embedder);
    // "e" has no word the model knows: no vector.
    assert_eq!(vectors.ids, ["a", "b", "c", "d"]);
    assert_eq!(report.vectors, 4);
    let engine = crate::search::Engine::new(index);
    engine.set_dense(Some(Arc::new(load(&engine.index, None).unwrap().unwrap())));
    let query = "how do i sort a vector";
    let q = embedder.embed(query).unwrap();
    let mut brute: Vec<(f32, &str)> = vectors
        .ids
        .iter()
        .enumerate()
        .map(|(row, id)| (dot(&q, vectors.row(row)), id.as_str()))
        .collect();
    brute.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let r = search(
        &engine,
        serde_json::json!({"q": query, "model": "dense", "k": 4, "collapse": "none"}),
    );
    let got: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
    let want: Vec<&str> = brute.iter().map(|(_, id)| *id).collect();
    assert_eq!(got, want);
    // A query of unknown words has no dense neighbours.
    let r = search(
        &engine,
        serde_json::json!({"q": "∏∏ ∑", "model": "dense", "collapse": "none"}),
    );
    assert!(r.hits.is_empty());
}

/// `dense.similarity` (SPEC §10, feature set v5) is the query's dot product with the
/// document's vector, computed anew here from each document's text; a document added since
/// the vectors were computed, or an index without vectors, keeps the default 0. A reranker
/// that reads it has the query embedded after a lexical first phase, and ranks as the
/// brute-force similarities say.
#[test]
fn the_dense_similarity_feature_is_the_dot_product_and_a_reranker_reading_it_gets_it() {
    let (model, _data, engine, texts) = served();
    let embedder = crate::embed::AnyEmbedder::load(model.path()).unwrap();
    engine
        .index
        .upsert([crate::corpus::Document {
            id: "new".into(),
            title: "vector string".into(),
            body: "sort the vector.".into(),
            ..Default::default()
        }])
        .unwrap();
    let query = "sort the vector string";
    let q = embedder.embed(query).unwrap();
    let oracle: std::collections::HashMap<&str, f32> = texts
        .iter()
        .map(|(id, text)| (id.as_str(), dot(&q, &embedder.embed(text).unwrap())))
        .collect();
    let set = crate::features::FeatureSet::current();
    let col = set.get(crate::features::DENSE_SIMILARITY).unwrap();
    let searcher = engine.index.reader.searcher();
    let window = |engine: &crate::search::Engine| {
        let w = engine
            .window(
                &searcher,
                query,
                crate::text::ModelKind::Bm25F,
                50,
                crate::features::Prf::Skip,
            )
            .unwrap()
            .unwrap();
        let ids = crate::features::candidate_ids(&searcher, &w.candidates).unwrap();
        let values: Vec<f32> = (0..ids.len()).map(|r| w.features.row(r)[col]).collect();
        (ids, values)
    };
    let (ids, values) = window(&engine);
    assert!(ids.len() > 5 && ids.contains(&"new".to_string()), "{ids:?}");
    for (id, v) in ids.iter().zip(&values) {
        let want = oracle.get(id.as_str()).copied().unwrap_or(0.0);
        assert!((v - want).abs() < 1e-5, "{id}: {v} vs {want}");
    }
    assert!(values.iter().any(|&v| v.abs() > 1e-3));
    // A reranker of the similarity alone orders BM25F's candidates by it (the document
    // without a vector at 0).
    let fit: Vec<f32> = values.iter().flat_map(|&v| [v, 1.0]).collect();
    let reranker = crate::rerank::testutil::linear_model(
        &[crate::features::DENSE_SIMILARITY, "url.depth"],
        &[1.0, 0.0],
        &fit,
    );
    let active = crate::search::model::ActiveModel::new(reranker, Default::default()).unwrap();
    assert!(active.reads_dense());
    engine.set_model(Some(Arc::new(active)));
    let r = search(
        &engine,
        serde_json::json!({"q": query, "model": "bm25f", "k": 50, "window": 50,
                           "collapse": "none"}),
    );
    assert_eq!(r.model, "bm25f");
    let got: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
    let mut want: Vec<(f32, usize, &str)> = ids
        .iter()
        .zip(&values)
        .enumerate()
        .map(|(rank, (id, &v))| (v, rank, id.as_str()))
        .collect();
    want.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let want: Vec<&str> = want.iter().map(|w| w.2).collect();
    assert_eq!(got, want);
    // A search that names no model has hybrid's first phase under such a reranker, as
    // model=hybrid has.
    let default = search(
        &engine,
        serde_json::json!({"q": query, "k": 10, "collapse": "none"}),
    );
    let hybrid = search(
        &engine,
        serde_json::json!({"q": query, "model": "hybrid", "k": 10, "collapse": "none"}),
    );
    assert_eq!(default.model, "hybrid");
    let ids = |r: &crate::search::SearchResponse| -> Vec<String> {
        r.hits.iter().map(|h| h.id.clone()).collect()
    };
    assert_eq!(ids(&default), ids(&hybrid));
    // Without vectors the feature keeps its default, the first phase is the index's model,
    // and the reranker still serves.
    engine.set_dense(None);
    let (_, values) = window(&engine);
    assert!(values.iter().all(|&v| v == 0.0), "{values:?}");
    let r = search(
        &engine,
        serde_json::json!({"q": query, "k": 5, "collapse": "none"}),
    );
    assert_eq!((r.model.as_str(), r.hits.len()), ("bm25f", 5));
    // Nor does a reranker reading text features alone change the default first phase.
    engine.set_dense(Some(Arc::new(load(&engine.index, None).unwrap().unwrap())));
    let text_only = crate::rerank::testutil::linear_model(&["bm25f"], &[1.0], &[1.0, 2.0]);
    let active = crate::search::model::ActiveModel::new(text_only, Default::default()).unwrap();
    assert!(!active.reads_dense());
    engine.set_model(Some(Arc::new(active)));
    let r = search(
        &engine,
        serde_json::json!({"q": query, "k": 5, "collapse": "none"}),
    );
    assert_eq!(r.model, "bm25f");
}

/// A reranker records the embedder whose similarities it was trained on
/// (`TrainingInfo::embedder`); served over vectors of another embedder, its dense similarity
/// stays 0 (a static model's cosines are not a transformer's) and the default first phase
/// stays lexical, even when a dense first phase embedded the query. (The training side and
/// the activation guard: `training::guard`'s tests.)
#[test]
fn a_reranker_trained_on_another_embedders_similarities_is_served_without_them() {
    let (_model, _data, engine, _texts) = served();
    let here = engine.dense().unwrap().index.vectors.model.clone();
    let query = "sort the vector string";
    let reranker = crate::rerank::testutil::linear_model(
        &[crate::features::DENSE_SIMILARITY, "url.depth"],
        &[1.0, 0.0],
        &[0.1, 1.0, 0.9, 2.0],
    );
    let dense_of = |r: &crate::search::SearchResponse| -> Vec<f32> {
        r.hits
            .iter()
            .map(|h| {
                let rerank = h.explain.as_ref().unwrap().rerank.as_ref().unwrap();
                rerank.features[crate::features::DENSE_SIMILARITY]
            })
            .collect()
    };
    let explained = |model: Option<&str>| {
        let mut params = serde_json::json!({"q": query, "k": 10, "collapse": "none",
                                           "explain": true});
        if let Some(m) = model {
            params["model"] = m.into();
        }
        search(&engine, params)
    };
    let same = reranker.clone().with_embedder(here.clone());
    assert_ne!(same.id(), reranker.id(), "the id covers the embedder");
    let other = reranker.clone().with_embedder("0".repeat(64));
    assert_ne!(other.id(), same.id());

    // Trained on these vectors: the default is hybrid and the feature is read.
    let active = crate::search::model::ActiveModel::new(same, Default::default()).unwrap();
    assert!(engine.dense_serves(&active));
    engine.set_model(Some(Arc::new(active)));
    let r = explained(None);
    assert_eq!(r.model, "hybrid");
    assert!(
        dense_of(&r).iter().any(|&v| v.abs() > 1e-3),
        "{:?}",
        dense_of(&r)
    );

    // Trained on another embedder's: lexical default, the feature at 0, even after a dense
    // first phase asked for by name.
    let active = crate::search::model::ActiveModel::new(other, Default::default()).unwrap();
    assert!(active.reads_dense() && !engine.dense_serves(&active));
    engine.set_model(Some(Arc::new(active)));
    let r = explained(None);
    assert_eq!(r.model, "bm25f");
    assert!(!r.hits.is_empty());
    assert!(dense_of(&r).iter().all(|&v| v == 0.0), "{:?}", dense_of(&r));
    let r = explained(Some("hybrid"));
    assert_eq!(r.model, "hybrid");
    assert!(dense_of(&r).iter().all(|&v| v == 0.0), "{:?}", dense_of(&r));
}
