#!/usr/bin/env python3
"""Embedding speed: rankd's embedder against sentence-transformers, same texts, same threads,
same run (docs/BENCHMARKS.md, "Sentence embeddings"); with --static DIR also rankd's static
embedder and the Python model2vec package on the Model2Vec directory DIR (distilled from the
same transformer by `rankd distill`).

Texts: 20 short natural-language queries, and ~200 Rust-docs-like documents: the title and the
first paragraph of the std pages of items (struct, trait, fn, enum, macro; every k-th page in
path order) of the documentation rustup installs. For 1 and then 2 threads: rankd's
`examples/embed_bench.rs` with RAYON_NUM_THREADS=T, sentence-transformers with
torch.set_num_threads(T). Query latency: each query encoded alone (`model.encode(q)`), 10
rounds after a warm-up, p50/p99; documents: `model.encode(docs, batch_size=32)`, median of 3.
The static models embed the documents --doc-repeat times (default 50) per timed run, a single
pass over 200 short texts taking a few milliseconds.

Agreement (--static only; a proxy, not a measure of search quality): for each query, how many
of the transformer's 10 nearest documents (cosine) the static model also puts in its 10
nearest, and the Spearman correlation of the two models' query-document similarities,
averaged over the queries.

    python3 -m venv /tmp/venv-m2v && /tmp/venv-m2v/bin/pip install -r bench/requirements-model2vec.txt
    cargo build --release --example embed_bench
    /tmp/venv-m2v/bin/python bench/embed_bench.py --profile release [--model DIR] [--bin PATH] \
        [--static DIR]
"""

import argparse
import glob
import html
import json
import os
import platform
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent

QUERIES = [
    "how do I iterate over a hashmap",
    "sort a vector in descending order",
    "read a file line by line",
    "convert a string to an integer",
    "difference between String and str",
    "spawn a thread and wait for it",
    "remove duplicates from a vec",
    "check if a file exists",
    "join strings with a separator",
    "reverse a string",
    "share data between threads",
    "parse command line arguments",
    "get the current time",
    "split a string by whitespace",
    "count occurrences in a list",
    "sleep for one second",
    "find the maximum of an iterator",
    "write bytes to a file",
    "environment variable value",
    "convert integer to float",
]


def rust_docs_texts(n=200):
    sysroot = subprocess.check_output(["rustc", "--print", "sysroot"], text=True).strip()
    root = Path(sysroot) / "share/doc/rust/html/std"
    pages = sorted(
        p for kind in ("struct", "trait", "fn", "enum", "macro")
        for p in glob.glob(f"{root}/**/{kind}.*.html", recursive=True)
    )
    step = max(1, len(pages) // n)
    texts = []
    for page in pages[::step][:n]:
        text = Path(page).read_text(errors="replace")
        title = re.search(r"<title>(.*?)</title>", text, re.S)
        para = re.search(r'class="docblock[^"]*">\s*<p>(.*?)</p>', text, re.S)
        strip = lambda s: html.unescape(re.sub(r"<[^>]+>", "", s)).split()  # noqa: E731
        words = strip(title.group(1) if title else "") + strip(para.group(1) if para else "")
        texts.append(" ".join(words))
    return texts


def python_reference(model_dir, threads, queries, docs, rounds):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(model_dir, device="cpu")
    return timed(
        model.encode, lambda: model.encode(docs, batch_size=32), queries, len(docs), rounds
    )


def timed(encode, encode_docs, queries, n_docs, rounds):
    """Query latency (each query encoded alone, `rounds` rounds after a warm-up; p50/p99 in
    ms) and documents per second (`encode_docs()` encodes `n_docs` texts; median of 3)."""
    for q in queries:
        encode(q)
    latencies = []
    for _ in range(rounds):
        for q in queries:
            start = time.perf_counter()
            encode(q)
            latencies.append((time.perf_counter() - start) * 1e3)
    latencies.sort()
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        encode_docs()
        runs.append(time.perf_counter() - start)
    pick = lambda p: latencies[round((len(latencies) - 1) * p)]  # noqa: E731
    return {
        "query_p50_ms": pick(0.5),
        "query_p99_ms": pick(0.99),
        "docs_per_s": n_docs / statistics.median(runs),
    }


def model2vec_reference(static_dir, queries, docs, rounds, doc_repeat):
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(static_dir)

    def encode_docs():
        for _ in range(doc_repeat):
            model.encode(docs)

    return timed(model.encode, encode_docs, queries, len(docs) * doc_repeat, rounds)


def agreement(model_dir, static_dir, queries, docs, k=10):
    """Top-k overlap and Spearman correlation of query-document cosines, static against the
    transformer, averaged over the queries."""
    import numpy as np
    from model2vec import StaticModel
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    def cosines(q, d):
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
        return q @ d.T

    transformer = SentenceTransformer(model_dir, device="cpu")
    static = StaticModel.from_pretrained(static_dir)
    dense = cosines(transformer.encode(queries), transformer.encode(docs))
    light = cosines(static.encode(queries), static.encode(docs))
    overlap, rho = [], []
    for a, b in zip(dense, light):
        top_a, top_b = set(np.argsort(-a)[:k]), set(np.argsort(-b)[:k])
        overlap.append(len(top_a & top_b) / k)
        rho.append(spearmanr(a, b).statistic)
    return {"overlap_at_10": float(np.mean(overlap)), "spearman": float(np.mean(rho))}


def main():
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(cache / "rankd" / "all-MiniLM-L6-v2"))
    parser.add_argument("--profile", default="debug")
    parser.add_argument("--bin", default=None)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--static", default=None, help="a Model2Vec directory")
    parser.add_argument("--doc-repeat", type=int, default=50)
    args = parser.parse_args()
    binary = args.bin or str(target / args.profile / "examples" / "embed_bench")

    docs = rust_docs_texts()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"queries": QUERIES, "docs": docs}, f)
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
        out = subprocess.check_output(
            [binary, f.name, args.model, "--rounds", str(args.rounds)], env=env, text=True
        )
        rankd = json.loads(out)
        python = python_reference(args.model, threads, QUERIES, docs, args.rounds)
        engines = [("rankd (candle)", rankd), ("sentence-transformers (torch)", python)]
        if args.static:
            out = subprocess.check_output(
                [binary, f.name, args.static, "--static", "--rounds", str(args.rounds),
                 "--doc-repeat", str(args.doc_repeat)], env=env, text=True
            )
            engines.append(("rankd static (Model2Vec)", json.loads(out)))
            engines.append(("model2vec (Python)", model2vec_reference(
                args.static, QUERIES, docs, args.rounds, args.doc_repeat)))
        rows.append((threads, engines))
    os.unlink(f.name)

    import sentence_transformers
    import torch

    print(f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; sentence-transformers {sentence_transformers.__version__}, "
          f"torch {torch.__version__}; rankd profile {args.profile}; {len(QUERIES)} queries x "
          f"{args.rounds} rounds; {len(docs)} documents, "
          f"{rows[0][1][0][1]['doc_tokens_mean']:.1f} tokens on average")
    if args.static:
        import model2vec

        print(f"static model {args.static}, model2vec {model2vec.__version__}, documents "
              f"embedded {args.doc_repeat} times a timed run")
    print()
    print("| threads | engine | query p50 (ms) | query p99 (ms) | documents/s |")
    print("|---|---|---|---|---|")
    for threads, engines in rows:
        for name, r in engines:
            print(f"| {threads} | {name} | {r['query_p50_ms']:.4f} | {r['query_p99_ms']:.4f} | "
                  f"{r['docs_per_s']:.1f} |")
    if args.static:
        a = agreement(args.model, args.static, QUERIES, docs)
        print()
        print(f"Agreement of the static model with the transformer (a proxy, not search quality): "
              f"top-10 overlap {a['overlap_at_10']:.3f}, Spearman {a['spearman']:.3f} "
              f"({len(QUERIES)} queries x {len(docs)} documents)")


if __name__ == "__main__":
    main()
