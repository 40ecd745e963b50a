"""Reference vectors of sentence-transformers for the embedder's parity test.

Writes tests/fixtures/embed/all-MiniLM-L6-v2.json: texts (queries, Rust-docs-like passages,
punctuation and code, accents and other scripts, an empty text and texts longer than the model's
256 tokens, which sentence-transformers cuts) and their vectors as the Python library computes
them (mean pooling, L2-normalised). The Rust test (`cargo test --lib embed::`) checks cosine
>= 0.9999 per text, so CI needs no Python for it.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch sentence-transformers
    rankd embed warm-up   # fetches the model into ~/.cache/rankd/all-MiniLM-L6-v2 once
    /tmp/venv/bin/python bench/embed_fixture.py [--model DIR]
"""

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sentence_transformers  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

LONG = (
    "A contiguous growable array type, written as Vec<T>, short for vector. "
    "Vectors have O(1) indexing, amortized O(1) push (to the end) and O(1) pop (from the end). "
    "Vectors ensure they never allocate more than isize::MAX bytes. "
)

TEXTS = [
    "how do I iterate over a hashmap",
    "sort a vector in descending order",
    "read a file line by line",
    "convert a string to an integer",
    "what is the difference between String and &str",
    "spawn a thread and wait for it to finish",
    "HashMap",
    "Vec::sort_by_key",
    "std::collections::BTreeMap - Rust. An ordered map based on a B-Tree.",
    "Iterator::fold: Folds every element into an accumulator by applying an operation, "
    "returning the final result.",
    "Option<T>: the Option type. Type Option represents an optional value: every Option is "
    "either Some and contains a value, or None, and does not.",
    "fn main() { let v: Vec<i32> = (0..10).filter(|x| x % 2 == 0).collect(); }",
    "Arc<Mutex<T>> shared state across threads",
    "Café, naïve façade — déjà vu",
    "Строки в Rust: UTF-8",
    "Rust の所有権とは何ですか",
    "🦀 ferris says hello",
    "",
    "   lots   of   spaces   ",
    "ERROR[E0382]: borrow of moved value: `v`",
    "https://doc.rust-lang.org/std/vec/struct.Vec.html#method.push",
    LONG * 3,
    LONG * 12,
    "the quick brown fox jumps over the lazy dog " * 40,
]


def main():
    default_model = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(default_model / "rankd" / "all-MiniLM-L6-v2"))
    parser.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent.parent
                    / "tests/fixtures/embed/all-MiniLM-L6-v2.json"),
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = SentenceTransformer(args.model, device="cpu")
    vectors = model.encode(TEXTS, batch_size=32, normalize_embeddings=True)
    out = {
        "provenance": (
            f"bench/embed_fixture.py: sentence-transformers {sentence_transformers.__version__}, "
            f"torch {torch.__version__}, all-MiniLM-L6-v2 (max_seq_length "
            f"{model.max_seq_length}), mean pooling, L2-normalised"
        ),
        "texts": TEXTS,
        "embeddings": [[round(float(x), 7) for x in v] for v in vectors],
    }
    Path(args.out).write_text(json.dumps(out, ensure_ascii=False) + "\n")
    print(f"{len(TEXTS)} texts, dim {vectors.shape[1]} -> {args.out}")


if __name__ == "__main__":
    main()
