#!/usr/bin/env python3
"""Builds the fixed query set of the text-core benchmark (docs/BENCHMARKS.md, issue 2).

Queries are what a reader of the Rust documentation types: API item names taken from the
rustdoc file names of std/core/alloc (`struct.Vec.html` -> `vec`, `fn.from_utf8.html` ->
`from utf8`) and the section headings of the Book (`Creating a New Hash Map`). A seeded
sample keeps the set fixed; it is generated once and committed as bench/queries/rust-docs.txt.

Usage: bench/make_queries.py [--docs DIR] [--out FILE] [--seed N]
"""

import argparse
import html
import os
import random
import re
import subprocess
import sys

API_CRATES = ("std", "core", "alloc")
# rustdoc page kinds that name an API item; `fn` is sampled on its own because the
# core::arch intrinsics make up most of its 38k pages.
TYPE_KINDS = ("struct", "enum", "trait", "macro", "type", "constant", "primitive", "keyword", "attr", "derive")
N_FN = 200
N_TYPES = 200
N_HEADINGS = 200
HEADING_RE = re.compile(r"<h([1-4])[^>]*>(.*?)</h\1>", re.S)
TAG_RE = re.compile(r"<[^>]+>")
# Item names as a user would type them: no `!` duplicates, no `_`-prefixed internals.
IDENT_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# The SIMD intrinsics (`_mm_maskz_cvtepu32_pd`, ...): nobody searches the docs for them.
ARCH_DIRS = {"arch", "core_arch"}


def default_docs():
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True)
    return os.path.join(sysroot.stdout.strip(), "share", "doc", "rust", "html")


def item_query(name):
    """`from_utf8` -> `from utf8`; `HashMap` -> `hashmap` (rankd's analyzer keeps camel case whole)."""
    return " ".join(w for w in name.lower().split("_") if w)


def api_items(docs):
    """(kind, query) for every API page of the std crates, sorted and de-duplicated."""
    items = set()
    for crate in API_CRATES:
        for root, dirs, files in os.walk(os.path.join(docs, crate)):
            dirs.sort()
            if ARCH_DIRS.intersection(root.split(os.sep)):
                continue
            for f in files:
                parts = f.split(".")
                if len(parts) != 3 or parts[2] != "html" or not IDENT_RE.fullmatch(parts[1]):
                    continue
                q = item_query(parts[1])
                if q:
                    items.add((parts[0], q))
    return sorted(items)


def book_headings(docs):
    """Lower-cased text of the Book's h1-h4 headings (menu and help headings excluded)."""
    out = set()
    book = os.path.join(docs, "book")
    for f in sorted(os.listdir(book)):
        if not f.endswith(".html") or f in ("print.html", "toc.html"):
            continue
        with open(os.path.join(book, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for m in HEADING_RE.finditer(text):
            if "menu-title" in m.group(0) or "mdbook-help" in m.group(0):
                continue
            words = re.findall(r"[a-z0-9]+", html.unescape(TAG_RE.sub(" ", m.group(2))).lower())
            if words:
                out.add(" ".join(words))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", default=None)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "queries", "rust-docs.txt"))
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args()
    docs = args.docs or default_docs()
    rng = random.Random(args.seed)
    items = api_items(docs)
    fns = sorted({q for k, q in items if k == "fn"})
    # Disjoint pools, so no query is asked twice.
    types = sorted({q for k, q in items if k in TYPE_KINDS} - set(fns))
    headings = sorted(set(book_headings(docs)) - set(fns) - set(types))
    if len(fns) < N_FN or len(types) < N_TYPES or len(headings) < N_HEADINGS:
        sys.exit(f"too few candidates under {docs}: {len(fns)} fns, {len(types)} types, {len(headings)} headings")
    queries = rng.sample(fns, N_FN) + rng.sample(types, N_TYPES) + rng.sample(headings, N_HEADINGS)
    rng.shuffle(queries)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(queries) + "\n")
    print(f"{len(queries)} queries ({len(fns)} fn, {len(types)} type, {len(headings)} heading candidates) -> {args.out}")


if __name__ == "__main__":
    main()
