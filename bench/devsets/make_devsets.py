#!/usr/bin/env python3
"""Builds the two development sets of bench/devsets/ from their hand-written specs.

    python3 bench/devsets/make_devsets.py \
        --docs "$(rustc --print sysroot)/share/doc/rust/html" \
        --rustlings /path/to/rust-lang/rustlings.git \
        --comprehensive-rust /path/to/google/comprehensive-rust.git

Inputs (hand-written, in this directory):
  items.spec.tsv      qid, query as a user types it, the std items it names
  questions.spec.tsv  qid, question, source repository and file, grade-2 and grade-1 items

Outputs (in this directory):
  items.topics, items.qrels, items.provenance.tsv
  questions.topics, questions.qrels, questions.provenance.tsv

An item is written as its std path (`std::collections::HashMap`), with a kind prefix where the
name alone is ambiguous or not a path: `macro:std::vec`, `mod:std::sync::mpsc`, `prim:str`,
`kw:for`. Its relevant pages are its page and every page of the same item under std/, core/ and
alloc/: same file name (`struct.HashMap.html`) and the same source location (the `src` link's
file and first line), which is how rustdoc renders an item re-exported elsewhere. A re-exported
module (std's page points at `core/lib.rs` or `alloc/lib.rs`) also has the original module's
page. Redirect stubs (`<meta http-equiv="refresh">`) are never relevant: rankd does not index
them. Page ids are paths under the docs directory, as `rankd ingest --format html` names them.

Provenance is read from the two repositories' git objects at HEAD (a bare mirror is enough):
for an item, the course files (rustlings' exercises, solutions and hints; Comprehensive Rust's
src/) that link its std page, import it (`use std::...`, group imports
expanded), name it with its module (`mpsc::channel`) or by name; for a question, the source
file's title and the std pages it links. Needs only the standard library and `git`.
"""

import argparse
import html
import os
import re
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
CRATES = ("std", "core", "alloc")
# Item kinds in the order tried when a path has no kind prefix.
KINDS = ("struct", "enum", "trait", "union", "type", "fn", "constant", "static", "macro", "derive")
REPOS = {
    "rustlings": "rust-lang/rustlings",
    "cr": "google/comprehensive-rust",
}
# The course text of each repository (not its tooling): where usage evidence is looked for.
CONTENT = {
    "rustlings": ("exercises/", "solutions/", "rustlings-macros/info.toml"),
    "cr": ("src/",),
}
# Words a query may carry beyond the item's name and path without copying its summary.
KIND_WORDS = {"trait", "macro", "enum", "struct", "fn", "type", "module"}


def fail(message):
    sys.exit(f"make_devsets: {message}")


# ---------------------------------------------------------------- the docs


class Docs:
    """The rustdoc tree: pages by file name, their source locations, redirects and summaries."""

    def __init__(self, root):
        self.root = root
        self.by_name = defaultdict(list)
        for crate in CRATES:
            for d, _, files in os.walk(os.path.join(root, crate)):
                for f in files:
                    if f.endswith(".html"):
                        rel = os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                        self.by_name[f].append(rel)
        self._text = {}

    def text(self, rel):
        if rel not in self._text:
            with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
                self._text[rel] = f.read()
        return self._text[rel]

    def exists(self, rel):
        return os.path.isfile(os.path.join(self.root, rel))

    def is_redirect(self, rel):
        return re.search(r'http-equiv="refresh"', self.text(rel), re.I) is not None

    def source(self, rel):
        """(source file, first line) of the page's `src` link, resolved against the page."""
        m = re.search(r'href="([^"]*src/[^"]*\.rs\.html)#(\d+)', self.text(rel))
        if not m:
            return None
        path = os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1)))
        return (path.replace(os.sep, "/"), int(m.group(2)))

    def summary(self, rel):
        m = re.search(r'<meta name="description" content="([^"]*)"', self.text(rel))
        return html.unescape(m.group(1)) if m else ""


def parse_item(spec):
    """`macro:std::vec` → ("macro", ["std", "vec"])."""
    kind, _, path = spec.partition(":") if re.match(r"^[a-z]+:[^:]", spec) else ("", "", spec)
    return kind, path.split("::")


def primary_page(docs, spec):
    kind, parts = parse_item(spec)
    if kind == "prim":
        return f"std/primitive.{parts[0]}.html"
    if kind == "kw":
        return f"std/keyword.{parts[0]}.html"
    if kind == "mod":
        return "/".join(parts) + "/index.html"
    *module, name = parts
    kinds = (kind,) if kind else KINDS
    for k in kinds:
        rel = "/".join(module + [f"{k}.{name}.html"])
        if docs.exists(rel) and not docs.is_redirect(rel):
            return rel
    fail(f"no page for {spec} (tried {', '.join(kinds)})")


def relevant_pages(docs, spec):
    """The item's page first, then every other page of the same item, sorted."""
    page = primary_page(docs, spec)
    if not docs.exists(page):
        fail(f"{spec}: {page} does not exist")
    if docs.is_redirect(page):
        fail(f"{spec}: {page} is a redirect stub")
    pages = {page}
    source = docs.source(page)
    if page.endswith("/index.html"):
        # A module std re-exports from core or alloc: its page points at that crate's lib.rs.
        if source and re.match(r"src/(core|alloc)/lib\.rs$", source[0]):
            crate = source[0].split("/")[1]
            original = crate + page[page.index("/"):]
            if docs.exists(original) and not docs.is_redirect(original):
                pages.add(original)
    elif source:
        for other in docs.by_name[os.path.basename(page)]:
            if other != page and not docs.is_redirect(other) and docs.source(other) == source:
                pages.add(other)
    return [page] + sorted(pages - {page})


def page_to_path(rel):
    """`std/collections/hash_map/struct.HashMap.html` → `std::collections::hash_map::HashMap`."""
    parts = rel[: -len(".html")].split("/")
    last = parts[-1]
    if last == "index":
        return "::".join(parts[:-1])
    name = last.split(".", 1)[1]
    if last.startswith(("primitive.", "keyword.")):
        return name
    return "::".join(parts[:-1] + [name])


# ---------------------------------------------------------------- the sources


class Repo:
    """The text files of one repository at HEAD, read from its git objects."""

    EXTENSIONS = (".rs", ".md", ".toml")

    def __init__(self, git_dir, name):
        self.name = name
        self.git_dir = git_dir
        self.commit = self.git("rev-parse", "HEAD").strip()
        listing = self.git("ls-tree", "-r", "HEAD")
        self.files = {}
        wanted = []
        for line in listing.splitlines():
            meta, path = line.split("\t", 1)
            _, typ, sha = meta.split()
            if typ == "blob" and path.endswith(self.EXTENSIONS):
                wanted.append((path, sha))
        batch = subprocess.run(
            ["git", "--git-dir", git_dir, "cat-file", "--batch"],
            input="".join(f"{sha}\n" for _, sha in wanted).encode(),
            capture_output=True,
            check=True,
        ).stdout
        pos = 0
        for path, _ in wanted:
            header_end = batch.index(b"\n", pos)
            size = int(batch[pos:header_end].split()[2])
            body = batch[header_end + 1 : header_end + 1 + size]
            pos = header_end + 1 + size + 1
            self.files[path] = body.decode("utf-8", errors="replace")

    def git(self, *args):
        return subprocess.run(
            ["git", "--git-dir", self.git_dir, *args], capture_output=True, check=True, text=True
        ).stdout


STD_LINK = re.compile(
    r"doc\.rust-lang\.org/(?:stable/|nightly/|beta/|1\.\d+\.\d+/)?((?:std|core|alloc)/[^\s)\]\"'>#?]*)"
)


def std_links(text):
    """The std/core/alloc pages a text links, as page ids (`std/option/` → `std/option/index.html`)."""
    links = []
    for m in STD_LINK.finditer(text):
        target = m.group(1).rstrip(".,;")
        if target.endswith("/") or "." not in target.rsplit("/", 1)[-1]:
            target = target.rstrip("/") + "/index.html"
        if target not in links:
            links.append(target)
    return links


USE = re.compile(r"\buse\s+((?:std|core|alloc)\s*::[^;]*);", re.S)


def expand_use(tree):
    """`std::sync::{Arc, mpsc::{self, Sender}}` → std::sync::Arc, std::sync::mpsc, ...::Sender."""
    tokens = re.findall(r"::|[{},*]|\bas\b|[A-Za-z_][A-Za-z0-9_]*", tree)
    pos = 0

    def parse(prefix):
        nonlocal pos
        out = []
        path = list(prefix)
        while pos < len(tokens):
            t = tokens[pos]
            if t == "{":
                pos += 1
                while pos < len(tokens) and tokens[pos] != "}":
                    out += parse(path)
                    if pos < len(tokens) and tokens[pos] == ",":
                        pos += 1
                pos += 1
                return out
            if t in (",", "}"):
                break
            if t == "as":
                pos += 2
                continue
            if t != "::":
                path = path + [t] if t != "self" else path
            pos += 1
        if path != list(prefix) or (prefix and tokens[pos - 1 : pos] == ["self"]):
            out.append("::".join(p for p in path if p != "*"))
        return out

    return parse([])


def item_evidence(repo, paths, name, is_macro):
    """The files where a repository uses the item, best evidence first: (kind, files)."""
    pages = {p for p in paths if p.endswith(".html")}
    full = {page_to_path(p) for p in pages}
    short = {"::".join(p.split("::")[-2:]) for p in full if "::" in p}
    found = defaultdict(list)
    for path, text in sorted(repo.files.items()):
        if not path.startswith(CONTENT[repo.name]):
            continue
        if any(link in pages for link in std_links(text)):
            found["link"].append(path)
        imported = {p for m in USE.finditer(text) for p in expand_use(m.group(1))}
        if imported & full:
            found["use"].append(path)
        if any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(s)}\b", text) for s in short):
            found["path"].append(path)
        pattern = rf"\b{re.escape(name)}!" if is_macro else rf"`{re.escape(name)}\b|\b{re.escape(name)}(?:::|<|\()"
        if re.search(pattern, text):
            found["name"].append(path)
    for kind in ("link", "use", "path", "name"):
        if found[kind]:
            return kind, found[kind]
    return None, []


# ---------------------------------------------------------------- the sets


def read_spec(name):
    rows = []
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            rows.append((n, line.split("\t")))
    return rows


def write(name, lines):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def summary_overlap(query, spec, summary):
    """Query words found in the summary that are neither the item's path nor a kind word."""
    _, parts = parse_item(spec)
    name_words = set()
    for p in parts:
        name_words.add(p.lower())
        name_words.update(w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", p))
        name_words.update(p.lower().split("_"))
    words = set(re.findall(r"[a-z0-9]+", query.lower())) - name_words - KIND_WORDS
    summary_words = set(re.findall(r"[a-z0-9]+", summary.lower()))
    return sorted(words & summary_words)


def build_items(docs, repos):
    topics, qrels, provenance = [], [], []
    provenance.append(
        "qid\tquery\titems\trelevant_pages\trepository\tcommit\tevidence\tfiles"
    )
    seen = set()
    for n, row in read_spec("items.spec.tsv"):
        qid, query, items = row[0], row[1], row[2].split()
        if qid in seen:
            fail(f"items.spec.tsv:{n}: {qid} twice")
        seen.add(qid)
        pages = []
        for spec in items:
            for p in relevant_pages(docs, spec):
                if p not in pages:
                    pages.append(p)
            overlap = summary_overlap(query, spec, docs.summary(primary_page(docs, spec)))
            if overlap:
                print(f"warning: {qid} `{query}` shares {overlap} with {spec}'s summary", file=sys.stderr)
        best = None
        for repo in repos:
            for spec in items:
                kind, parts = parse_item(spec)
                ev = item_evidence(repo, relevant_pages(docs, spec), parts[-1], kind == "macro")
                rank = ("link", "use", "path", "name", None).index(ev[0])
                if best is None or rank < best[0]:
                    best = (rank, repo, ev)
        rank, repo, (kind, files) = best
        if kind is None:
            fail(f"{qid}: no source names {items}")
        topics.append(f"{qid}\t{query}")
        qrels += [f"{qid} 0 {p} 1" for p in pages]
        provenance.append(
            "\t".join(
                [qid, query, " ".join(items), " ".join(pages), REPOS[repo.name], repo.commit,
                 kind, " ".join(files[:5])]
            )
        )
    write("items.topics", topics)
    write("items.qrels", qrels)
    write("items.provenance.tsv", provenance)
    return len(topics), len(qrels)


def exercise_hint(repo, path):
    """A rustlings exercise's hint from rustlings-macros/info.toml (where its doc links live)."""
    info = repo.files.get("rustlings-macros/info.toml", "")
    name = os.path.splitext(os.path.basename(path))[0]
    m = re.search(rf'\[\[exercises\]\]\s*name = "{re.escape(name)}".*?(?=\[\[exercises\]\]|\Z)', info, re.S)
    return m.group(0) if m else ""


def title_of(text, path):
    m = re.search(r"^# (.+)$", text, re.M)
    return m.group(1).strip() if m else os.path.basename(path)


def build_questions(docs, repos):
    by_name = {r.name: r for r in repos}
    topics, qrels, provenance = [], [], []
    provenance.append(
        "qid\tquestion\trepository\tcommit\tfile\ttitle\tstd_links\tgrade2_pages\tgrade1_pages"
    )
    seen = set()
    linked_total = linked_judged = 0
    for n, row in read_spec("questions.spec.tsv"):
        row += [""] * (6 - len(row))
        qid, question, source, path, grade2, grade1 = row[:6]
        if qid in seen:
            fail(f"questions.spec.tsv:{n}: {qid} twice")
        seen.add(qid)
        repo = by_name[source]
        if path not in repo.files:
            fail(f"{qid}: {path} not in {REPOS[source]} at {repo.commit}")
        text = repo.files[path]
        links = std_links(text)
        if source == "rustlings":
            links += [l for l in std_links(exercise_hint(repo, path)) if l not in links]
        grades = {}
        for grade, specs in ((2, grade2.split()), (1, grade1.split())):
            for spec in specs:
                for p in relevant_pages(docs, spec):
                    grades[p] = max(grades.get(p, 0), grade)
        if not any(g == 2 for g in grades.values()):
            fail(f"{qid}: no grade-2 page")
        for link in links:
            page = link
            if docs.exists(page) and docs.is_redirect(page):
                continue
            linked_total += 1
            linked_judged += page in grades
        topics.append(f"{qid}\t{question}")
        qrels += [f"{qid} 0 {p} {g}" for p, g in sorted(grades.items())]
        provenance.append(
            "\t".join(
                [qid, question, REPOS[source], repo.commit, path, title_of(text, path),
                 " ".join(links),
                 " ".join(p for p, g in sorted(grades.items()) if g == 2),
                 " ".join(p for p, g in sorted(grades.items()) if g == 1)]
            )
        )
    write("questions.topics", topics)
    write("questions.qrels", qrels)
    write("questions.provenance.tsv", provenance)
    return len(topics), len(qrels), linked_judged, linked_total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", required=True, help="the Rust docs' html directory")
    ap.add_argument("--rustlings", required=True, help="git directory of rust-lang/rustlings")
    ap.add_argument("--comprehensive-rust", required=True, help="git directory of google/comprehensive-rust")
    args = ap.parse_args()
    docs = Docs(args.docs)
    repos = [Repo(args.rustlings, "rustlings"), Repo(args.comprehensive_rust, "cr")]
    for r in repos:
        print(f"{REPOS[r.name]} at {r.commit}: {len(r.files)} files", file=sys.stderr)
    q, j = build_items(docs, repos)
    print(f"items: {q} queries, {j} relevant pages", file=sys.stderr)
    q, j, judged, linked = build_questions(docs, repos)
    print(
        f"questions: {q} questions, {j} judged pages; {judged} of the {linked} std links "
        "in their source files are judged",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
