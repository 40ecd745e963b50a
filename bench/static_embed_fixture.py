"""Reference outputs of the Python `model2vec` package for the static embedder's oracle tests.

Two fixtures under tests/fixtures/embed/model2vec/:

- inference: two tiny Model2Vec directories built here deterministically (a 64-token WordPiece
  vocabulary; `tiny-float32`: float32 rows, normalize=true; `tiny-quantized`: float16 rows
  shared by several tokens through a `mapping`, per-token `weights`, normalize=false) and
  `StaticModel.encode` of >= 20 texts on each (`inference.json`). The Rust test
  (`cargo test --lib embed::`) loads the same directories and compares per text.
- distillation (`--distill`): `model2vec.distill` (its defaults: PCA to 256 dimensions, SIF
  coefficient 1e-4, float16) on the all-MiniLM-L6-v2 directory, and `encode` of 50 texts on
  the result (`distilled-all-MiniLM-L6-v2.json`), with the seconds it took. The Rust test
  distills the same directory itself and compares the texts' vectors and their pairwise
  cosine similarities, which PCA's sign and rotation freedom leaves unchanged.

    python3 -m venv /tmp/venv-m2v && /tmp/venv-m2v/bin/pip install -r bench/requirements-model2vec.txt
    /tmp/venv-m2v/bin/python bench/static_embed_fixture.py [--distill] [--model DIR] [--save DIR]
"""

import argparse
import json
import os
import shutil
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from embed_bench import QUERIES  # noqa: E402  (bench/ is the script's directory)
import model2vec  # noqa: E402
import numpy as np  # noqa: E402
from model2vec import StaticModel  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from tokenizers.models import WordPiece  # noqa: E402
from tokenizers.normalizers import BertNormalizer  # noqa: E402
from tokenizers.pre_tokenizers import BertPreTokenizer  # noqa: E402
from tokenizers.processors import TemplateProcessing  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests/fixtures/embed/model2vec"

WORDS = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "how", "do", "i", "iterate", "over", "a", "hash",
    "##map", "sort", "vector", "in", "descending", "order", "the", "string", "##s", "read",
    "file", "line", "by", "convert", "to", "integer", "thread", "spawn", "and", "wait", "for",
    "it", "rust", "vec", "##tor", "##ing", "café", "de", "##ja", "vu", "bor", "##row", "moved",
    "value", "error", "of", "fn", "main", "let", "(", ")", "{", "}", ":", ";", "<", ">", ".",
    ",", "!", "?", "é", "##e",
]

TINY_TEXTS = [
    "how do I iterate over a hashmap",
    "sort a vector in descending order",
    "read a file line by line",
    "convert a string to an integer",
    "spawn a thread and wait for it",
    "Rust Vec<String>",
    "HASHMAP",
    "vectoring strings",
    "Café, déjà vu!",
    "borrow of moved value",
    "error: borrow of moved value: `v`",
    "fn main() { let v = vec; }",
    "the the the the",
    "a",
    "",
    "   ",
    "zebra quokka",
    "zebra the quokka",
    "hashmaps; vectors; strings.",
    "??? !!! ...",
    "order order order descending",
    "in the order of the file",
    "how do i sort the vector of strings in descending order by line " * 60,
]

# The benchmark's 20 questions (bench/embed_bench.py), then texts of other kinds.
DISTILL_TEXTS = QUERIES + [
    "HashMap",
    "Vec::sort_by_key",
    "std::collections::BTreeMap - Rust. An ordered map based on a B-Tree.",
    "Iterator::fold: Folds every element into an accumulator by applying an operation, "
    "returning the final result.",
    "Option<T>: the Option type. Type Option represents an optional value.",
    "fn main() { let v: Vec<i32> = (0..10).filter(|x| x % 2 == 0).collect(); }",
    "Arc<Mutex<T>> shared state across threads",
    "Café, naïve façade — déjà vu",
    "Строки в Rust: UTF-8",
    "Rust の所有権とは何ですか",
    "🦀 ferris says hello",
    "ERROR[E0382]: borrow of moved value: `v`",
    "https://doc.rust-lang.org/std/vec/struct.Vec.html#method.push",
    "the weather in paris is mild in spring",
    "a recipe for chocolate cake with walnuts",
    "the stock market fell sharply on tuesday",
    "football world cup final results",
    "how to train a puppy to sit",
    "symptoms of the common cold",
    "best hiking trails in the alps",
    "the history of the roman empire",
    "quantum entanglement explained simply",
    "cheap flights from london to new york",
    "learn to play the guitar in a month",
    "the mitochondria is the powerhouse of the cell",
    "electric cars and battery range",
    "a poem about the sea at night",
    "tax deadline for small businesses",
    "how vaccines train the immune system",
    "A contiguous growable array type, written as Vec<T>, short for vector. " * 20,
]


def tiny_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(WordPiece({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.normalizer = BertNormalizer()
    tokenizer.pre_tokenizer = BertPreTokenizer()
    # A post-processor that model2vec must not apply (it encodes without special tokens).
    tokenizer.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return tokenizer


def tiny_models(rng: np.random.Generator) -> dict[str, StaticModel]:
    n, dim = len(WORDS), 8
    plain = StaticModel(
        vectors=rng.standard_normal((n, dim)).astype(np.float32),
        tokenizer=tiny_tokenizer(),
        config={"model_type": "model2vec", "hidden_dim": dim},
        normalize=True,
    )
    rows = 16
    quantized = StaticModel(
        vectors=rng.standard_normal((rows, dim)).astype(np.float16),
        tokenizer=tiny_tokenizer(),
        config={"model_type": "model2vec", "hidden_dim": dim},
        normalize=False,
        max_length=40,
        weights=rng.uniform(0.1, 2.0, n).astype(np.float32),
        token_mapping=rng.integers(0, rows, n).astype(np.int64),
    )
    return {"tiny-float32": plain, "tiny-quantized": quantized}


def inference_fixture():
    rng = np.random.default_rng(20241014)
    out = {
        "provenance": f"bench/static_embed_fixture.py: model2vec {model2vec.__version__} "
        "StaticModel.encode (max_length 512)",
        "texts": TINY_TEXTS,
        "models": {},
    }
    for name, model in tiny_models(rng).items():
        directory = OUT / name
        shutil.rmtree(directory, ignore_errors=True)
        model.save_pretrained(directory)
        # The model card says nothing the test needs.
        (directory / "README.md").unlink(missing_ok=True)
        reloaded = StaticModel.from_pretrained(directory)
        vectors = reloaded.encode(TINY_TEXTS)
        out["models"][name] = [[float(x) for x in v] for v in vectors.astype(np.float64)]
    (OUT / "inference.json").write_text(json.dumps(out, ensure_ascii=False) + "\n")
    print(f"{len(TINY_TEXTS)} texts x {len(out['models'])} tiny models -> {OUT / 'inference.json'}")


def distill_fixture(model_dir: str, save: str | None):
    import torch
    from model2vec.distill import distill

    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    start = time.perf_counter()
    model = distill(model_name=model_dir, device="cpu")
    seconds = time.perf_counter() - start
    if save:
        model.save_pretrained(save)
    vectors = model.encode(DISTILL_TEXTS).astype(np.float64)
    out = {
        "provenance": (
            f"bench/static_embed_fixture.py --distill: model2vec {model2vec.__version__} "
            f"distill (pca_dims 256, sif_coefficient 1e-4, float16), torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads, {seconds:.1f} s, on all-MiniLM-L6-v2"
        ),
        "distill_seconds": seconds,
        "vocabulary": len(model.tokens),
        "dim": int(model.dim),
        "texts": DISTILL_TEXTS,
        "embeddings": [[round(float(x), 7) for x in v] for v in vectors],
    }
    path = OUT / "distilled-all-MiniLM-L6-v2.json"
    path.write_text(json.dumps(out, ensure_ascii=False) + "\n")
    print(f"distilled {len(model.tokens)} tokens x {model.dim} in {seconds:.1f} s; "
          f"{len(DISTILL_TEXTS)} texts -> {path}")


def main():
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distill", action="store_true")
    parser.add_argument("--model", default=str(cache / "rankd" / "all-MiniLM-L6-v2"))
    parser.add_argument("--save", default=None, help="also save the distilled model here")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    inference_fixture()
    if args.distill:
        distill_fixture(args.model, args.save)


if __name__ == "__main__":
    main()
