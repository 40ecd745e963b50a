//! The cluster protocol's encoding (`rankd::cluster::wire`, JSON over HTTP) against two
//! binary encodings that keep serde's field names and defaults (MessagePack with named fields,
//! CBOR): encode + decode time and size of the messages a search sends. Results:
//! docs/BENCHMARKS.md, "Cluster wire format". Run with short windows:
//!
//! `cargo bench --bench wire -- --warm-up-time 1 --measurement-time 3`
//!
//! Messages, as a root over three shards sends and receives them per shard:
//! - `query_reply/default48`: the default search's reply (a shard's short list of the collapse
//!   window, 48 candidates with the page key and language, the first 6 with their fields);
//!   `default48-arrays` is the same with each candidate encoded as an array of its fields (a
//!   tuple struct) instead of a map, to measure what the field names cost;
//! - `query_reply/100`: a rerank window's candidates (100, ids as the Rust docs' paths, graph
//!   nodes);
//! - `query_reply/fetch10`: a default page's 10 candidates with their title, URL and snippet
//!   (the first phase fetches short pages);
//! - `query_call`: the call with the collection statistics of a three-term query over every
//!   field, collection frequencies included (what reranking ships);
//! - `features_reply/34`: a third of a 100-document window's feature rows.
//!
//! Formats that drop field names (bincode, postcard) are left out: the protocol's optional
//! fields (`skip_serializing_if`) need a self-describing encoding.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rankd::cluster::wire::{
    DocRef, FeaturesReply, QueryCall, QueryReply, WireCandidate, WireHit, PROTOCOL,
};
use rankd::search::Returns;
use rankd::text::stats::{GlobalStats, TermStats};
use serde::de::DeserializeOwned;
use serde::Serialize;

fn id(i: usize) -> String {
    let kinds = ["struct", "trait", "fn", "enum", "macro"];
    format!(
        "std/collections/{}.Item{i}Name.html",
        kinds[i % kinds.len()]
    )
}

fn candidate(i: usize, shown: bool) -> WireCandidate {
    WireCandidate {
        doc: DocRef {
            segment: (i % 7) as u32,
            doc: (i * 7919 % 40_000) as u32,
        },
        id: id(i),
        score: (12.5f32 - i as f32 * 0.037).to_bits(),
        sort_key: None,
        boost: None,
        node: Some((i * 104_729 % 90_000) as u32),
        keys: None,
        shown: shown.then(|| WireHit {
            id: id(i),
            url: Some(format!("https://doc.rust-lang.org/{}", id(i))),
            title: Some(format!("Item{i}Name in std::collections - Rust")),
            snippet: Some(
                "A hash map implemented with quadratic probing and SIMD lookup. By default, \
                 <b>HashMap</b> uses a hashing algorithm selected to provide resistance against \
                 HashDoS attacks."
                    .into(),
            ),
            explain: None,
        }),
    }
}

fn query_reply(n: usize, shown: bool) -> QueryReply {
    QueryReply {
        protocol: PROTOCOL,
        current: 42,
        total_hits: 5_321,
        no_terms: false,
        sortable: false,
        vectors: None,
        hits: (0..n).map(|i| candidate(i, shown)).collect(),
    }
}

fn stats() -> GlobalStats {
    let fields = ["title", "headings", "body", "anchor", "url", "all"];
    let terms = ["hash", "map", "iter"];
    GlobalStats {
        num_docs: 41_873,
        total_tokens: fields
            .iter()
            .enumerate()
            .map(|(i, f)| (f.to_string(), 1_000_000 * (i as u64 + 1)))
            .collect(),
        terms: fields
            .iter()
            .map(|f| {
                let by_term: BTreeMap<String, TermStats> = terms
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let stats = TermStats {
                            df: 900 + 37 * i as u64,
                            cf: Some(4_000 + 101 * i as u64),
                        };
                        (t.to_string(), stats)
                    })
                    .collect();
                (f.to_string(), by_term)
            })
            .collect(),
        rating: None,
    }
}

fn query_call() -> QueryCall {
    QueryCall {
        protocol: PROTOCOL,
        generation: 42,
        text: "hash map iter".into(),
        model: "bm25f".into(),
        field: None,
        limit: 100,
        stats: stats(),
        boost: None,
        collapse: Vec::new(),
        fetch: Some(Returns::ALL),
        fetch_first: None,
        sort: None,
        now: Some(1_790_000_000),
        lang: None,
        dense_optional: false,
    }
}

fn features_reply(rows: usize) -> FeaturesReply {
    let cols = rankd::features::FeatureSet::current().len();
    FeaturesReply {
        protocol: PROTOCOL,
        feature_set: "v9".into(),
        cols,
        // Feature values as a window has them: many zeros, the rest spread-out floats.
        values: (0..rows * cols)
            .map(|i| match i % 3 {
                0 => 0.0f32.to_bits(),
                _ => ((i as f32).sin() * 17.3).to_bits(),
            })
            .collect(),
        out_links: (0..rows)
            .map(|r| (0..r % 4).map(|k| (r * 31 + k) as u32).collect())
            .collect(),
    }
}

fn json<T: Serialize>(m: &T) -> Vec<u8> {
    serde_json::to_vec(m).unwrap()
}

fn msgpack<T: Serialize>(m: &T) -> Vec<u8> {
    rmp_serde::to_vec_named(m).unwrap()
}

fn cbor<T: Serialize>(m: &T) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(m, &mut out).unwrap();
    out
}

/// A format's name, encoder and decoder.
type Encoding<T> = (&'static str, fn(&T) -> Vec<u8>, fn(&[u8]) -> T);

/// One message in every format: round-trips checked, sizes printed, then timed.
fn message<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    c: &mut Criterion,
    name: &str,
    m: &T,
) {
    let encodings: [Encoding<T>; 3] = [
        ("json", json::<T>, |b| serde_json::from_slice(b).unwrap()),
        ("msgpack", msgpack::<T>, |b| {
            rmp_serde::from_slice(b).unwrap()
        }),
        ("cbor", cbor::<T>, |b| ciborium::from_reader(b).unwrap()),
    ];
    let mut group = c.benchmark_group("wire");
    for (format, encode, decode) in encodings {
        let bytes = encode(m);
        assert_eq!(&decode(&bytes), m, "{format} round trip");
        eprintln!("wire/{name}/{format}: {} bytes", bytes.len());
        group.bench_with_input(BenchmarkId::new(name, format), m, |b, m| {
            b.iter(|| decode(&encode(black_box(m))))
        });
    }
    group.finish();
}

/// The default search's reply per shard today: 48 candidates with the page key and language,
/// the first 6 with their fields, graph nodes.
fn default_reply() -> QueryReply {
    let mut r = query_reply(48, false);
    for (i, c) in r.hits.iter_mut().enumerate() {
        c.keys = Some(rankd::text::columns::CollapseKeys {
            page: Some(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1)),
            lang: Some(0x656e),
            ..Default::default()
        });
        if i < 6 {
            c.shown = candidate(i, true).shown;
        }
    }
    r
}

/// The same reply with each candidate as an array of its fields (a tuple struct).
#[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
struct ArrayReply {
    protocol: u32,
    current: u64,
    total_hits: usize,
    no_terms: bool,
    sortable: bool,
    hits: Vec<ArrayCandidate>,
}

type Keys5 = (
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
);

#[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
struct ArrayCandidate(
    u32,
    u32,
    String,
    u32,
    Option<u64>,
    Option<u32>,
    Option<u32>,
    Option<Keys5>,
    Option<WireHit>,
);

fn as_arrays(r: QueryReply) -> ArrayReply {
    ArrayReply {
        protocol: r.protocol,
        current: r.current,
        total_hits: r.total_hits,
        no_terms: r.no_terms,
        sortable: r.sortable,
        hits: r
            .hits
            .into_iter()
            .map(|c| {
                let keys = c.keys.map(|k| (k.simhash, k.page, k.site, k.group, k.lang));
                ArrayCandidate(
                    c.doc.segment,
                    c.doc.doc,
                    c.id,
                    c.score,
                    c.sort_key,
                    c.boost,
                    c.node,
                    keys,
                    c.shown,
                )
            })
            .collect(),
    }
}

fn wire(c: &mut Criterion) {
    message(c, "query_reply/default48", &default_reply());
    message(
        c,
        "query_reply/default48-arrays",
        &as_arrays(default_reply()),
    );
    message(c, "query_reply/100", &query_reply(100, false));
    message(c, "query_reply/fetch10", &query_reply(10, true));
    message(c, "query_call", &query_call());
    message(c, "features_reply/34", &features_reply(34));
}

criterion_group!(benches, wire);
criterion_main!(benches);
