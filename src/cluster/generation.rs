//! Index generations on object storage (design note §8): a shard's index as
//! published by the process that writes it, and fetched by the replicas that serve it.
//!
//! A **generation** of shard `s` is a manifest listing every file a replica needs — tantivy's
//! `meta.json` and the files of the segments it names, `index.toml`, rankd's `manifest.json`,
//! the link scores and the document vectors (`crate::dense`) — each with its SHA-256 and
//! size. A generation without vectors leaves a replica's own (its embedding job keeps them
//! up to date); one with vectors replaces them, and the job reuses every vector whose
//! document text is unchanged. In the store ([`Store`]):
//!
//! ```text
//! blobs/<sha256>                          file contents, written once, shared by generations
//! shards/<s>/generations/<g:012>.json     the manifest of generation g (never rewritten)
//! shards/<s>/CURRENT                      {"generation": g}: a hint, where readers start
//! ```
//!
//! **Publishing** uploads the blobs the store lacks — a commit adds segments and leaves the
//! old ones alone, so only new segments move — after checking those of the newest generation
//! it reuses ([`Check`]: sizes, or contents read back) and uploading a lost or damaged one
//! again from the index, so a damaged blob never passes into the next generation; and then
//! creates the manifest of generation
//! `g + 1` with a create-if-absent put. That put is the commit point: two publishers cannot both
//! create `g + 1` (the loser is told to publish again), and a publisher that dies before it
//! leaves only unreferenced blobs. `CURRENT` is then advanced, but readers do not trust it
//! alone: they roll forward from it while a next manifest exists, so a publisher dying between
//! the two puts loses nothing.
//!
//! **Following** ([`prepare`], [`Prepared::commit`]): a replica lays the new generation out in
//! a staging directory beside its index — hard links for files it already has (same path and
//! checksum), downloads for the rest, each checked against the manifest's SHA-256 and size —
//! and opens it there as an index (`TextIndex::open`: manifest, analysis and segments checked)
//! before anything is touched. A missing or corrupt blob, or a generation that does not open,
//! is refused and the old generation keeps serving. The switch itself moves the new segment
//! files into the index directory (new names: tantivy never rewrites a file) and then
//! replaces `meta.json` by a rename, tantivy's own commit point; the server reloads its reader
//! and link scores together under `Engine::switch_generation`, so a search pinned to a
//! generation sees that generation's documents and link scores only (`super::leaf::Pins`).
//! Files of older generations are removed after the switch: a searcher still pinned to one
//! keeps its memory maps, which outlive the names on Linux.
//!
//! Why not a remote tantivy `Directory` reading segments from the store on demand (Quickwit's
//! way): rankd's scorers read postings synchronously and expect local memory-mapped latency;
//! copying the immutable files once per replica keeps the query path unchanged.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use futures_util::StreamExt;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use super::storage::Store;
use crate::durable::write_atomic;

/// The manifest format this rankd writes and reads.
pub(crate) const FORMAT: u32 = 1;
/// Where a replica records the generation its directory holds (the applied manifest).
pub(crate) const LOCAL_RECORD: &str = "generation.json";
/// Where a replica lays out a generation before switching to it.
const STAGING: &str = ".generation-staging";
/// Files above this size go up in parts (S3 takes at most 5 GiB in one put).
const MULTIPART_ABOVE: u64 = 16 << 20;

/// One file of a generation, by its path relative to the shard's data directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub sha256: String,
    pub size: u64,
}

/// A published generation of one shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub shard: u32,
    /// How many shards the collection has, and how documents were routed to them.
    pub shards: u32,
    pub hash_scheme: String,
    pub generation: u64,
    /// Unix seconds.
    pub published_at: u64,
    pub num_docs: u64,
    /// Sorted by path.
    pub files: Vec<FileEntry>,
}

impl Manifest {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

#[derive(Serialize, Deserialize)]
struct Current {
    generation: u64,
}

fn manifest_key(store: &Store, shard: u32, generation: u64) -> object_store::path::Path {
    store.key(&[
        "shards",
        &shard.to_string(),
        "generations",
        &format!("{generation:012}.json"),
    ])
}

fn current_key(store: &Store, shard: u32) -> object_store::path::Path {
    store.key(&["shards", &shard.to_string(), "CURRENT"])
}

fn blob_key(store: &Store, sha256: &str) -> object_store::path::Path {
    store.key(&["blobs", sha256])
}

fn not_found(e: &object_store::Error) -> bool {
    matches!(e, object_store::Error::NotFound { .. })
}

/// The newest generation of `shard` in `store`, if any: `CURRENT`, rolled forward while a
/// newer manifest exists.
pub async fn latest(store: &Store, shard: u32) -> anyhow::Result<Option<u64>> {
    let mut generation = match store.inner.get(&current_key(store, shard)).await {
        Ok(r) => {
            let bytes = r.bytes().await?;
            let c: Current = serde_json::from_slice(&bytes).with_context(|| {
                format!("{} is not a generation pointer", current_key(store, shard))
            })?;
            c.generation
        }
        Err(e) if not_found(&e) => 0,
        Err(e) => {
            return Err(anyhow!(e).context(format!("cannot read the store {}", store.url)));
        }
    };
    loop {
        match store
            .inner
            .head(&manifest_key(store, shard, generation + 1))
            .await
        {
            Ok(_) => generation += 1,
            Err(e) if not_found(&e) => break,
            Err(e) => {
                return Err(anyhow!(e).context(format!("cannot read the store {}", store.url)));
            }
        }
    }
    Ok((generation > 0).then_some(generation))
}

/// The manifest of `generation` of `shard`.
pub async fn manifest(store: &Store, shard: u32, generation: u64) -> anyhow::Result<Manifest> {
    let key = manifest_key(store, shard, generation);
    let bytes = store
        .inner
        .get(&key)
        .await
        .with_context(|| format!("cannot read {key} from {}", store.url))?
        .bytes()
        .await
        .with_context(|| format!("cannot read {key} from {}", store.url))?;
    let m: Manifest = serde_json::from_slice(&bytes)
        .with_context(|| format!("{key} in {} is not a generation manifest", store.url))?;
    if m.format != FORMAT || m.shard != shard || m.generation != generation {
        bail!(
            "{key} in {} describes format {} shard {} generation {}, not format {FORMAT} shard \
             {shard} generation {generation}",
            store.url,
            m.format,
            m.shard,
            m.generation
        );
    }
    Ok(m)
}

fn sha256_file(path: &Path) -> anyhow::Result<(String, u64)> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((format!("{:x}", hasher.finalize()), size))
}

/// Is `path` (relative) a file tantivy writes once and never changes (a segment's file)?
fn immutable(path: &str) -> bool {
    path.starts_with("index/") && path != "index/meta.json"
}

/// The files of the index in `dir` as they are now, with checksums. A segment file listed in
/// `previous` with the same size is not read again: tantivy names segment files by a fresh
/// UUID and never rewrites one.
fn local_files(dir: &Path, previous: Option<&Manifest>) -> anyhow::Result<(Vec<FileEntry>, u64)> {
    let index_dir = dir.join("index");
    let meta_path = index_dir.join("meta.json");
    let before =
        std::fs::read(&meta_path).with_context(|| format!("{} holds no index", dir.display()))?;
    let index = tantivy::Index::open_in_dir(&index_dir)
        .with_context(|| format!("cannot open the index in {}", dir.display()))?;
    let metas = index.load_metas()?;
    let num_docs: u64 = metas.segments.iter().map(|s| u64::from(s.num_docs())).sum();
    let segments: BTreeSet<String> = metas
        .segments
        .iter()
        .map(|s| s.id().uuid_string())
        .collect();
    let mut paths: Vec<String> = vec!["index/meta.json".into()];
    for entry in std::fs::read_dir(&index_dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some((stem, _)) = name.split_once('.') {
            if segments.contains(stem) {
                paths.push(format!("index/{name}"));
            }
        }
    }
    for name in [
        "index.toml",
        "manifest.json",
        crate::links::SIDECAR_NAME,
        crate::dense::store::FILE_NAME,
    ] {
        if dir.join(name).exists() {
            paths.push(name.to_string());
        }
    }
    paths.sort();
    let known: BTreeMap<&str, &FileEntry> = previous
        .map(|m| m.files.iter().map(|f| (f.path.as_str(), f)).collect())
        .unwrap_or_default();
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let full = dir.join(&path);
        let size = std::fs::metadata(&full)
            .with_context(|| {
                format!(
                    "{} disappeared while publishing (the index changed); publish again",
                    full.display()
                )
            })?
            .len();
        let entry = match known.get(path.as_str()) {
            Some(f) if immutable(&path) && f.size == size => (*f).clone(),
            _ => {
                let (sha256, size) = sha256_file(&full)?;
                FileEntry { path, sha256, size }
            }
        };
        files.push(entry);
    }
    if std::fs::read(&meta_path)? != before {
        bail!(
            "the index in {} committed while publishing; publish again",
            dir.display()
        );
    }
    Ok((files, num_docs))
}

/// How far `publish` checks the blobs of the newest generation it reuses instead of
/// uploading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Check {
    /// Each is in the store with its size (one `HEAD` each): a lost or truncated blob.
    #[default]
    Sizes,
    /// Each is downloaded and its SHA-256 compared too (`rankd publish --verify`): any
    /// damage, at the cost of reading the whole generation back.
    Contents,
}

/// What is wrong with a blob of the store, if anything.
async fn blob_problem(
    store: &Store,
    file: &FileEntry,
    check: Check,
) -> anyhow::Result<Option<String>> {
    let key = blob_key(store, &file.sha256);
    match store.inner.head(&key).await {
        Ok(meta) if meta.size != file.size => {
            return Ok(Some(format!(
                "{} bytes instead of {}",
                meta.size, file.size
            )))
        }
        Ok(_) => {}
        Err(e) if not_found(&e) => return Ok(Some("missing".into())),
        Err(e) => return Err(anyhow!(e).context(format!("cannot read {}", store.url))),
    }
    if check == Check::Sizes {
        return Ok(None);
    }
    let got = store
        .inner
        .get(&key)
        .await
        .with_context(|| format!("cannot read {key} from {}", store.url))?;
    let mut stream = got.into_stream();
    let mut hasher = Sha256::new();
    while let Some(chunk) = stream.next().await {
        hasher.update(&chunk.with_context(|| format!("cannot read {key} from {}", store.url))?);
    }
    let sha256 = format!("{:x}", hasher.finalize());
    Ok((sha256 != file.sha256).then(|| format!("its SHA-256 is {sha256}")))
}

/// One shard's newest generation in a store, read back whole ([`verify`]).
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub shard: u32,
    pub generation: u64,
    pub files: usize,
    pub bytes: u64,
    /// Each lost or damaged blob: `path: problem`.
    pub damaged: Vec<String>,
}

/// Every shard's newest manifest in `store`: the shards are those shard 0's newest manifest
/// counts; a shard without a generation is an error.
async fn newest_manifests(store: &Store) -> anyhow::Result<Vec<Manifest>> {
    let Some(first) = latest(store, 0).await? else {
        bail!("the store {} has no generation of shard 0", store.url);
    };
    let first = manifest(store, 0, first).await?;
    let mut out = Vec::with_capacity(first.shards as usize);
    let shards = first.shards;
    out.push(first);
    for shard in 1..shards {
        let Some(generation) = latest(store, shard).await? else {
            bail!("the store {} has no generation of shard {shard}", store.url);
        };
        out.push(manifest(store, shard, generation).await?);
    }
    Ok(out)
}

/// Reads back every blob of every shard's newest generation in `store` and compares it with
/// its manifest (size and SHA-256): what `rankd store verify` reports. `progress` is called
/// after each blob.
pub async fn verify(store: &Store, progress: &(dyn Fn() + Sync)) -> anyhow::Result<Vec<Verified>> {
    let mut out = Vec::new();
    for m in newest_manifests(store).await? {
        let mut damaged = Vec::new();
        for file in &m.files {
            if let Some(problem) = blob_problem(store, file, Check::Contents).await? {
                damaged.push(format!("{}: {problem}", file.path));
            }
            progress();
        }
        out.push(Verified {
            shard: m.shard,
            generation: m.generation,
            files: m.files.len(),
            bytes: m.bytes(),
            damaged,
        });
    }
    Ok(out)
}

/// One shard's newest generation after [`repair`].
#[derive(Debug, Clone, Serialize)]
pub struct Repaired {
    pub shard: u32,
    pub generation: u64,
    pub files: usize,
    /// Each blob found lost or damaged and uploaded again: `path: problem, from FILE`.
    pub repaired: Vec<String>,
    /// Each lost or damaged blob no directory held a copy of: `path: problem`.
    pub unrepaired: Vec<String>,
}

/// Checks every blob of every shard's newest generation as [`verify`] does and uploads each
/// lost or damaged one again from a copy found in `from`: directories of any shard's replicas
/// or writer (a replica following the store holds its generation's files), searched at the
/// manifest's path first, then anywhere below for a file of the same size. A copy is used only
/// when its SHA-256 is the manifest's, so any directory is safe to name; blobs are addressed
/// by content, so a copy from another shard or generation is as good. What no directory holds
/// is reported, not guessed.
pub async fn repair(
    store: &Store,
    from: &[PathBuf],
    progress: &(dyn Fn() + Sync),
) -> anyhow::Result<Vec<Repaired>> {
    let mut by_size: Option<HashMap<u64, Vec<PathBuf>>> = None;
    let mut out = Vec::new();
    for m in newest_manifests(store).await? {
        let (mut repaired, mut unrepaired) = (Vec::new(), Vec::new());
        for file in &m.files {
            let problem = blob_problem(store, file, Check::Contents).await?;
            progress();
            let Some(problem) = problem else { continue };
            let is_copy = |path: &PathBuf| matches!(sha256_file(path), Ok((sha, size)) if sha == file.sha256 && size == file.size);
            let mut copy = from.iter().map(|d| d.join(&file.path)).find(is_copy);
            if copy.is_none() {
                let same_size = by_size.get_or_insert_with(|| files_by_size(from));
                copy = same_size
                    .get(&file.size)
                    .and_then(|paths| paths.iter().find(|p| is_copy(p)).cloned());
            }
            match copy {
                Some(path) => {
                    upload(store, &path, file).await?;
                    repaired.push(format!("{}: {problem}, from {}", file.path, path.display()));
                }
                None => unrepaired.push(format!("{}: {problem}", file.path)),
            }
        }
        out.push(Repaired {
            shard: m.shard,
            generation: m.generation,
            files: m.files.len(),
            repaired,
            unrepaired,
        });
    }
    Ok(out)
}

/// Every regular file below `dirs`, by size.
fn files_by_size(dirs: &[PathBuf]) -> HashMap<u64, Vec<PathBuf>> {
    let mut out: HashMap<u64, Vec<PathBuf>> = HashMap::new();
    for entry in dirs
        .iter()
        .flat_map(|d| walkdir::WalkDir::new(d).into_iter().filter_map(Result::ok))
    {
        if let Ok(meta) = entry.metadata() {
            if meta.is_file() {
                out.entry(meta.len()).or_default().push(entry.into_path());
            }
        }
    }
    out
}

/// What publishing one shard did.
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    pub shard: u32,
    pub generation: u64,
    /// Nothing changed since the newest generation: none was created.
    pub unchanged: bool,
    pub files: usize,
    pub bytes: u64,
    pub files_uploaded: usize,
    pub bytes_uploaded: u64,
    /// Blobs of the newest generation found lost or damaged and uploaded again from this
    /// index (`path: problem`); the generation published with them is whole.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<String>,
    pub seconds: f64,
    /// The manifest's key in the store.
    pub manifest: String,
    /// The generation created (`None` when unchanged).
    #[serde(skip)]
    pub record: Option<Manifest>,
}

/// Uploads `full` as the blob of `file`, checking that what it read has the checksum the
/// manifest gives it: a file replaced between listing and upload (the embedding job writes
/// its vectors whenever it likes) would otherwise be stored under another file's checksum, a
/// blob every replica would refuse.
async fn upload(store: &Store, full: &Path, file: &FileEntry) -> anyhow::Result<()> {
    let key = blob_key(store, &file.sha256);
    let changed = || {
        anyhow!(
            "{} changed while publishing (its checksum is no longer the one listed); publish \
             again",
            full.display()
        )
    };
    if file.size <= MULTIPART_ABOVE {
        let bytes =
            std::fs::read(full).with_context(|| format!("cannot read {}", full.display()))?;
        if format!("{:x}", Sha256::digest(&bytes)) != file.sha256 {
            return Err(changed());
        }
        store
            .inner
            .put(&key, PutPayload::from(bytes))
            .await
            .with_context(|| format!("cannot upload {} to {}", file.path, store.url))?;
        return Ok(());
    }
    let upload = store
        .inner
        .put_multipart(&key)
        .await
        .with_context(|| format!("cannot upload {} to {}", file.path, store.url))?;
    let mut writer = WriteMultipart::new(upload);
    let mut f =
        std::fs::File::open(full).with_context(|| format!("cannot read {}", full.display()))?;
    let mut buf = vec![0u8; 8 << 20];
    let mut hasher = Sha256::new();
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        writer.wait_for_capacity(4).await?;
        writer.write(&buf[..n]);
    }
    if format!("{:x}", hasher.finalize()) != file.sha256 {
        // Not completed, so no blob is created under the wrong checksum.
        let _ = writer.abort().await;
        return Err(changed());
    }
    writer
        .finish()
        .await
        .with_context(|| format!("cannot upload {} to {}", file.path, store.url))?;
    Ok(())
}

/// Publishes the index in `dir` as the next generation of `shard` (of `shards`), checking the
/// blobs it reuses by their sizes ([`Check::Sizes`]).
pub async fn publish(
    store: &Store,
    dir: &Path,
    shard: u32,
    shards: u32,
) -> anyhow::Result<Published> {
    publish_checked(store, dir, shard, shards, Check::Sizes).await
}

/// [`publish`] with the blobs it reuses checked as `check` says.
pub async fn publish_checked(
    store: &Store,
    dir: &Path,
    shard: u32,
    shards: u32,
    check: Check,
) -> anyhow::Result<Published> {
    let newest = match latest(store, shard).await? {
        Some(g) => Some(manifest(store, shard, g).await?),
        None => None,
    };
    publish_after(store, dir, shard, shards, newest, check).await
}

/// [`publish`] with the newest generation as the caller read it: the new one is created as
/// its successor, or not at all if another publisher created that first. Every blob of the
/// newest generation this index reuses is checked (`check`); one lost or damaged is uploaded
/// again from this index when its file here has the manifest's checksum (else publishing
/// fails, naming it), so a damaged blob never passes from one generation to the next.
pub async fn publish_after(
    store: &Store,
    dir: &Path,
    shard: u32,
    shards: u32,
    newest: Option<Manifest>,
    check: Check,
) -> anyhow::Result<Published> {
    let started = Instant::now();
    let (files, num_docs) = local_files(dir, newest.as_ref())?;
    let bytes = files.iter().map(|f| f.size).sum();
    let mut repaired = Vec::new();
    let (mut files_uploaded, mut bytes_uploaded) = (0, 0);
    if let Some(m) = &newest {
        let reused: BTreeSet<&str> = m.files.iter().map(|f| f.sha256.as_str()).collect();
        let mut seen = BTreeSet::new();
        for file in files.iter().filter(|f| reused.contains(f.sha256.as_str())) {
            if !seen.insert(file.sha256.as_str()) {
                continue;
            }
            let Some(problem) = blob_problem(store, file, check).await? else {
                continue;
            };
            // `local_files` took a segment file's checksum from the manifest: read it here
            // before it replaces the store's copy.
            let full = dir.join(&file.path);
            let (sha256, size) = sha256_file(&full)?;
            if sha256 != file.sha256 || size != file.size {
                bail!(
                    "the store's blob of {} is damaged ({problem}) and {} differs from it too;                      publish from the index that wrote generation {}",
                    file.path,
                    full.display(),
                    m.generation
                );
            }
            tracing::warn!(
                "shard {shard}: the store's blob of {} was {problem}; uploaded again",
                file.path
            );
            upload(store, &full, file).await?;
            files_uploaded += 1;
            bytes_uploaded += file.size;
            repaired.push(format!("{}: {problem}", file.path));
        }
        if m.files == files {
            return Ok(Published {
                shard,
                generation: m.generation,
                unchanged: true,
                files: files.len(),
                bytes,
                files_uploaded,
                bytes_uploaded,
                repaired,
                seconds: started.elapsed().as_secs_f64(),
                manifest: manifest_key(store, shard, m.generation).to_string(),
                record: None,
            });
        }
    }
    let present: BTreeSet<&str> = newest
        .iter()
        .flat_map(|m| m.files.iter().map(|f| f.sha256.as_str()))
        .collect();
    let mut done = BTreeSet::new();
    for file in &files {
        if present.contains(file.sha256.as_str()) || !done.insert(file.sha256.clone()) {
            continue;
        }
        match store.inner.head(&blob_key(store, &file.sha256)).await {
            Ok(meta) if meta.size == file.size => continue,
            Ok(_) => {}
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(anyhow!(e).context(format!("cannot read {}", store.url))),
        }
        upload(store, &dir.join(&file.path), file).await?;
        files_uploaded += 1;
        bytes_uploaded += file.size;
    }
    let generation = newest.as_ref().map_or(1, |m| m.generation + 1);
    let m = Manifest {
        format: FORMAT,
        shard,
        shards,
        hash_scheme: super::routing::HASH_SCHEME.to_string(),
        generation,
        published_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        num_docs,
        files,
    };
    let key = manifest_key(store, shard, generation);
    let created = store
        .inner
        .put_opts(
            &key,
            PutPayload::from(serde_json::to_vec_pretty(&m)?),
            PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            },
        )
        .await;
    match created {
        Ok(_) => {}
        Err(object_store::Error::AlreadyExists { .. }) => {
            // Ours already, when an earlier attempt's put went through but its answer was
            // lost (a retried put, a timeout): the same files make the same generation.
            let existing = manifest(store, shard, generation).await?;
            if existing.files != m.files {
                return Err(AnotherPublisher {
                    shard,
                    generation,
                    url: store.url.clone(),
                }
                .into());
            }
        }
        Err(e) => return Err(anyhow!(e).context(format!("cannot write {key} to {}", store.url))),
    }
    // The manifest is the commit; CURRENT only spares readers the roll-forward, so failing
    // to advance it loses nothing.
    let current = PutPayload::from(serde_json::to_vec(&Current { generation })?);
    if let Err(e) = store.inner.put(&current_key(store, shard), current).await {
        tracing::warn!(
            "generation {generation} of shard {shard} is published, but CURRENT could not be \
             advanced (readers roll forward past it): {e}"
        );
    }
    Ok(Published {
        shard,
        generation,
        unchanged: false,
        files: m.files.len(),
        bytes: m.bytes(),
        files_uploaded,
        bytes_uploaded,
        repaired,
        seconds: started.elapsed().as_secs_f64(),
        manifest: key.to_string(),
        record: Some(m),
    })
}

/// Publishing lost the race for its generation: another publisher created it first.
#[derive(Debug, thiserror::Error)]
#[error("another publisher created generation {generation} of shard {shard} in {url} first; publish again")]
pub struct AnotherPublisher {
    pub shard: u32,
    pub generation: u64,
    pub url: String,
}

/// The generation a replica's directory holds, if it follows a store.
pub(crate) fn local_generation(dir: &Path) -> anyhow::Result<Option<Manifest>> {
    let path = dir.join(LOCAL_RECORD);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
            format!("{} is not a generation record", path.display())
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow!(e).context(format!("cannot read {}", path.display()))),
    }
}

/// A generation laid out and checked beside the index, ready to switch to.
pub struct Prepared {
    dir: PathBuf,
    staging: PathBuf,
    /// The generation `dir` held when this one was prepared (its files are kept one more
    /// generation).
    previous: Option<Manifest>,
    /// The generation's link scores, loaded once to check them and then served.
    links: Option<crate::links::LinkData>,
    pub manifest: Manifest,
    pub files_fetched: usize,
    pub bytes_fetched: u64,
    pub files_reused: usize,
}

/// What switching did.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    pub shard: u32,
    pub generation: u64,
    pub num_docs: u64,
    pub files_fetched: usize,
    pub bytes_fetched: u64,
    pub files_reused: usize,
    pub files_removed: usize,
}

async fn download(store: &Store, file: &FileEntry, to: &Path) -> anyhow::Result<()> {
    let key = blob_key(store, &file.sha256);
    let result = store.inner.get(&key).await.map_err(|e| {
        if not_found(&e) {
            anyhow!(
                "the store {} has no blob {key} for {}",
                store.url,
                file.path
            )
        } else {
            anyhow!(e).context(format!("cannot fetch {} from {}", file.path, store.url))
        }
    })?;
    let mut out =
        std::fs::File::create(to).with_context(|| format!("cannot create {}", to.display()))?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut stream = result.into_stream();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.with_context(|| format!("cannot fetch {} from {}", file.path, store.url))?;
        hasher.update(&chunk);
        size += chunk.len() as u64;
        out.write_all(&chunk)
            .with_context(|| format!("cannot write {}", to.display()))?;
    }
    out.sync_all()?;
    let sha256 = format!("{:x}", hasher.finalize());
    if sha256 != file.sha256 || size != file.size {
        bail!(
            "{} from {} is corrupt: {size} bytes with SHA-256 {sha256}, the manifest says {} \
             bytes with {}",
            file.path,
            store.url,
            file.size,
            file.sha256
        );
    }
    Ok(())
}

/// Is `path` a file a generation may place: a name in the data directory, or one in its
/// `index/` directory (a manifest naming `../x` or `/etc/x` is refused, not followed)?
fn placeable(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let name_ok = |p: &str| !p.is_empty() && p != "." && p != "..";
    match parts[..] {
        [name] => name_ok(name),
        ["index", name] => name_ok(name),
        _ => false,
    }
}

/// Lays `manifest` out in a staging directory of `dir` — reusing the files `dir` already
/// holds, fetching the others — and opens it as an index to check it. Nothing of what `dir`
/// serves changes; an error refuses the generation.
pub async fn prepare(store: &Store, dir: &Path, manifest: Manifest) -> anyhow::Result<Prepared> {
    let refuse = |e: anyhow::Error| {
        e.context(format!(
            "generation {} of shard {} refused",
            manifest.generation, manifest.shard
        ))
    };
    let staging = dir.join(STAGING);
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("cannot clear {}", staging.display()))?;
    }
    std::fs::create_dir_all(staging.join("index"))
        .with_context(|| format!("cannot create {}", staging.display()))?;
    let previous = local_generation(dir)?;
    let recorded: BTreeMap<&str, &FileEntry> = previous
        .iter()
        .flat_map(|m| m.files.iter().map(|f| (f.path.as_str(), f)))
        .collect();
    let (mut files_fetched, mut bytes_fetched, mut files_reused) = (0, 0, 0);
    for file in &manifest.files {
        if !placeable(&file.path) {
            return Err(refuse(anyhow!(
                "the manifest names the file {:?}",
                file.path
            )));
        }
        let have = dir.join(&file.path);
        let to = staging.join(&file.path);
        let same = match std::fs::metadata(&have) {
            Ok(m) if m.len() == file.size => match recorded.get(file.path.as_str()) {
                Some(r) => r.sha256 == file.sha256,
                None => sha256_file(&have)?.0 == file.sha256,
            },
            _ => false,
        };
        if same {
            std::fs::hard_link(&have, &to)
                .with_context(|| format!("cannot link {} into {}", have.display(), to.display()))?;
            files_reused += 1;
        } else {
            download(store, file, &to).await.map_err(refuse)?;
            files_fetched += 1;
            bytes_fetched += file.size;
        }
    }
    let links = check_staged(dir, &staging, &manifest).map_err(refuse)?;
    Ok(Prepared {
        dir: dir.to_path_buf(),
        staging,
        previous,
        links,
        manifest,
        files_fetched,
        bytes_fetched,
        files_reused,
    })
}

/// The staged generation opens as rankd's index, holds the documents its manifest counts, and
/// keeps the analysis and scoring settings `dir` serves with (a running server cannot change
/// them; a new collection can).
/// Returns its link scores, if it has any.
fn check_staged(
    dir: &Path,
    staging: &Path,
    manifest: &Manifest,
) -> anyhow::Result<Option<crate::links::LinkData>> {
    let index = crate::text::TextIndex::open(staging, None)?;
    let num_docs = index.num_docs();
    drop(index);
    if num_docs != manifest.num_docs {
        bail!(
            "it holds {num_docs} documents, its manifest says {}",
            manifest.num_docs
        );
    }
    let sidecar = staging.join(crate::links::SIDECAR_NAME);
    let links = match sidecar.exists() {
        true => Some(
            crate::graph::sidecar::read(&sidecar, None)
                .map_err(anyhow::Error::from)
                .and_then(crate::links::LinkData::new)
                .context("its link scores do not load")?,
        ),
        false => None,
    };
    let vectors = crate::dense::store::path(staging);
    if vectors.exists() {
        crate::dense::store::read(&vectors).context("its document vectors do not load")?;
    }
    let serving = dir.join("index.toml");
    if serving.exists() && std::fs::read(&serving)? != std::fs::read(staging.join("index.toml"))? {
        bail!(
            "its index.toml differs from the one served in {}: analysis and scoring settings \
             cannot change under a running replica (publish a new collection instead)",
            dir.display()
        );
    }
    Ok(links)
}

impl Prepared {
    /// Switches `dir` to the prepared generation: new segment files in, then `meta.json`
    /// replaced by a rename (the commit point), then the other files, the local record, and
    /// the removal of files no generation since the previous one names. The caller reloads
    /// its reader afterwards and serves the returned link scores (`Engine::switch_generation`
    /// does both under one lock).
    pub fn commit(mut self) -> anyhow::Result<(Applied, Option<crate::links::LinkData>)> {
        let links = self.links.take();
        let index_dir = self.dir.join("index");
        std::fs::create_dir_all(&index_dir)?;
        let previous = &self.previous;
        for file in &self.manifest.files {
            if immutable(&file.path) {
                let target = self.dir.join(&file.path);
                if !target.exists() {
                    std::fs::rename(self.staging.join(&file.path), &target)
                        .with_context(|| format!("cannot move {} into place", file.path))?;
                }
            }
        }
        sync_dir(&index_dir)?;
        for file in &self.manifest.files {
            if !immutable(&file.path) {
                std::fs::rename(self.staging.join(&file.path), self.dir.join(&file.path))
                    .with_context(|| format!("cannot move {} into place", file.path))?;
            }
            if file.path == "index/meta.json" {
                sync_dir(&index_dir)?;
            }
        }
        if !self
            .manifest
            .files
            .iter()
            .any(|f| f.path == crate::links::SIDECAR_NAME)
        {
            let stale = self.dir.join(crate::links::SIDECAR_NAME);
            if stale.exists() {
                std::fs::remove_file(&stale)?;
            }
        }
        sync_dir(&self.dir)?;
        write_atomic(
            &self.dir.join(LOCAL_RECORD),
            &serde_json::to_vec_pretty(&self.manifest)?,
        )?;
        std::fs::remove_dir_all(&self.staging)
            .with_context(|| format!("cannot remove {}", self.staging.display()))?;
        // Keep the files of this generation and the previous one; remove the rest.
        let keep: BTreeSet<String> = self
            .manifest
            .files
            .iter()
            .chain(previous.iter().flat_map(|m| m.files.iter()))
            .filter_map(|f| f.path.strip_prefix("index/").map(str::to_string))
            .collect();
        let mut files_removed = 0;
        for entry in std::fs::read_dir(&index_dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || keep.contains(&name) || !entry.file_type()?.is_file() {
                continue;
            }
            std::fs::remove_file(entry.path())?;
            files_removed += 1;
        }
        Ok((
            Applied {
                shard: self.manifest.shard,
                generation: self.manifest.generation,
                num_docs: self.manifest.num_docs,
                files_fetched: self.files_fetched,
                bytes_fetched: self.bytes_fetched,
                files_reused: self.files_reused,
                files_removed,
            },
            links,
        ))
    }
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync the directory {}", dir.display()))
}

/// The newest generation of `shard` if it is newer than `have`, the generation held.
pub async fn newer(
    store: &Store,
    have: Option<u64>,
    shard: u32,
) -> anyhow::Result<Option<Manifest>> {
    let Some(newest) = latest(store, shard).await? else {
        return Ok(None);
    };
    if have.is_some_and(|g| g >= newest) {
        return Ok(None);
    }
    Ok(Some(manifest(store, shard, newest).await?))
}

/// Brings `dir` to the newest generation of `shard` before a server opens it. Without a
/// generation in the store it is an error unless `dir` already holds one. A generation that
/// is refused (a lost or damaged blob) is passed over, saying so, for the newest older one
/// that opens, newer than what `dir` holds: a new replica starts on the last whole
/// generation, and follows newer ones as they are published or repaired.
pub async fn bootstrap(store: &Store, dir: &Path, shard: u32) -> anyhow::Result<Option<Applied>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let held = local_generation(dir)?.map(|m| m.generation);
    let Some(newest) = newer(store, held, shard).await? else {
        if held.is_some() {
            return Ok(None);
        }
        bail!(
            "the store {} has no generation of shard {shard} yet; `rankd publish` writes one",
            store.url
        )
    };
    let mut refused: Vec<String> = Vec::new();
    let mut candidate = Some(newest);
    while let Some(m) = candidate {
        let generation = m.generation;
        match prepare(store, dir, m).await {
            Ok(p) => {
                if !refused.is_empty() {
                    tracing::warn!(
                        "shard {shard}: starting on generation {generation}, the newest that                          opens ({})",
                        refused.join("; ")
                    );
                }
                return Ok(Some(p.commit()?.0));
            }
            Err(e) => refused.push(format!("{e:#}")),
        }
        candidate = match generation.checked_sub(1) {
            Some(older) if older > held.unwrap_or(0) => match manifest(store, shard, older).await {
                Ok(m) => Some(m),
                Err(e) => {
                    refused.push(format!("{e:#}"));
                    None
                }
            },
            _ => None,
        };
    }
    match held {
        Some(g) => {
            tracing::warn!(
                "shard {shard}: serving generation {g}, which it holds; every newer one is                  refused ({})",
                refused.join("; ")
            );
            Ok(None)
        }
        None => bail!(
            "no generation of shard {shard} opens: {}",
            refused.join("; ")
        ),
    }
}

/// Brings a leaf that stops being its shard's primary back to the store: when its directory
/// holds anything its generation record does not (a commit whose publishing failed, vectors
/// written since), the store's newest generation is laid out again trusting no local
/// checksum (files are hashed), and switched to, so the leaf serves what the store holds and
/// nothing unacknowledged. The caller holds the index's write lock. Whether it switched.
pub async fn resync<E>(
    store: &Store,
    shard: u32,
    engine: &std::sync::Arc<E>,
) -> anyhow::Result<bool>
where
    E: AsRef<crate::search::Engine> + Send + Sync + 'static,
{
    let dir = engine.as_ref().as_ref().index.dir.clone();
    let Some(newest) = latest(store, shard).await? else {
        return Ok(false);
    };
    let held = local_generation(&dir)?;
    if let Some(h) = &held {
        // Whole (the store's newest, or behind it, which following takes from here).
        if local_files(&dir, Some(h)).is_ok_and(|(files, _)| files == h.files) {
            return Ok(false);
        }
    }
    let m = manifest(store, shard, newest).await?;
    let record = dir.join(LOCAL_RECORD);
    if record.exists() {
        std::fs::remove_file(&record)
            .with_context(|| format!("cannot remove {}", record.display()))?;
    }
    switch_to(store, engine, m).await?;
    Ok(true)
}

/// Lays out `manifest`'s generation beside the index ([`prepare`]) and switches the engine
/// to it (`Engine::switch_generation`, on the blocking pool).
pub(crate) async fn switch_to<E>(
    store: &Store,
    engine: &std::sync::Arc<E>,
    manifest: Manifest,
) -> anyhow::Result<Applied>
where
    E: AsRef<crate::search::Engine> + Send + Sync + 'static,
{
    let generation = manifest.generation;
    let dir = engine.as_ref().as_ref().index.dir.clone();
    let prepared = prepare(store, &dir, manifest).await?;
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || {
        engine
            .as_ref()
            .as_ref()
            .switch_generation(generation, || prepared.commit())
    })
    .await?
}

/// Keeps a serving replica of `shard` on the newest generation in `store`, checking every
/// `interval`. A refused generation is retried after 15 intervals (a blob repaired or uploaded
/// late heals; a corrupt one is not fetched again at every look); store errors
/// are logged once per distinct message and the replica goes on serving what it has.
pub async fn follow<E>(store: Store, shard: u32, engine: std::sync::Arc<E>, interval: Duration)
where
    E: AsRef<crate::search::Engine> + Send + Sync + 'static,
{
    let (_never, stop) = tokio::sync::watch::channel(false);
    follow_until(store, shard, engine, interval, stop).await
}

/// [`follow`] until `stop` turns true; it is looked at between generations only, so a
/// generation being switched to is switched to whole before this returns.
pub async fn follow_until<E>(
    store: Store,
    shard: u32,
    engine: std::sync::Arc<E>,
    interval: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) where
    E: AsRef<crate::search::Engine> + Send + Sync + 'static,
{
    let dir = engine.as_ref().as_ref().index.dir.clone();
    if let Some(g) = engine.as_ref().as_ref().store_generation() {
        crate::metrics::set_generation(shard, g, 0);
    }
    let mut refused: Option<(u64, Instant)> = None;
    let mut last_error = String::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
        let held = engine.as_ref().as_ref().store_generation();
        let manifest = match newer(&store, held, shard).await {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                crate::metrics::count_generation_event(shard, "store_error");
                let message = format!("{e:#}");
                if message != last_error {
                    tracing::warn!("shard {shard}: serving the generation it has: {message}");
                    last_error = message;
                }
                continue;
            }
        };
        last_error.clear();
        if refused.is_some_and(|(g, at)| g == manifest.generation && at.elapsed() < interval * 15) {
            continue;
        }
        let generation = manifest.generation;
        let started = Instant::now();
        let prepared = match prepare(&store, &dir, manifest).await {
            Ok(p) => p,
            Err(e) => {
                crate::metrics::count_generation_event(shard, "refused");
                tracing::error!("shard {shard}: {e:#}; the previous generation keeps serving");
                refused = Some((generation, Instant::now()));
                continue;
            }
        };
        let engine = engine.clone();
        let switched = tokio::task::spawn_blocking(move || {
            engine
                .as_ref()
                .as_ref()
                .switch_generation(generation, || prepared.commit())
        })
        .await;
        match switched {
            Ok(Ok(applied)) => {
                crate::metrics::count_generation_event(shard, "switch");
                crate::metrics::set_generation(shard, applied.generation, applied.bytes_fetched);
                tracing::info!(
                    "shard {shard}: now serving generation {} ({} documents; fetched {} files, \
                     {} bytes, reused {}; {:.0} ms)",
                    applied.generation,
                    applied.num_docs,
                    applied.files_fetched,
                    applied.bytes_fetched,
                    applied.files_reused,
                    started.elapsed().as_secs_f64() * 1e3
                );
                refused = None;
            }
            Ok(Err(e)) => {
                crate::metrics::count_generation_event(shard, "refused");
                tracing::error!("shard {shard}: cannot switch to generation {generation}: {e:#}");
                refused = Some((generation, Instant::now()));
            }
            Err(e) => tracing::error!("shard {shard}: the generation switch panicked: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_places_files_only_in_the_data_and_index_directories() {
        for ok in [
            "index.toml",
            "manifest.json",
            "index/meta.json",
            "index/abc.idx",
        ] {
            assert!(placeable(ok), "{ok}");
        }
        for bad in [
            "",
            "..",
            ".",
            "/etc/passwd",
            "../x",
            "index/../x",
            "index/",
            "a/b",
            "index/a/b",
            "index//x",
        ] {
            assert!(!placeable(bad), "{bad}");
        }
    }
}

#[cfg(test)]
mod vector_tests {
    use super::*;

    /// A data directory with three documents and their vectors (a tiny model's).
    fn source() -> (tempfile::TempDir, tempfile::TempDir) {
        let (model, dir, _index) =
            crate::dense::tests::indexed_with_vectors((0..3).map(|i| crate::corpus::Document {
                id: format!("d{i}"),
                title: "sort the vector".into(),
                body: format!("how do i iterate over a hash map {i}."),
                ..Default::default()
            }));
        (model, dir)
    }

    /// A file whose content changed after it was listed is not uploaded under its listed
    /// checksum, in one put or in parts.
    #[tokio::test]
    async fn a_file_changed_after_listing_is_not_uploaded_under_its_old_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let store_dir = tempfile::tempdir().unwrap();
        let store = Store::open(&format!("file://{}", store_dir.path().display())).unwrap();
        for size in [1000usize, (MULTIPART_ABOVE + 1) as usize] {
            let path = dir.path().join("vectors.bin");
            std::fs::write(&path, vec![1u8; size]).unwrap();
            let (sha256, size) = sha256_file(&path).unwrap();
            let listed = FileEntry {
                path: "vectors.bin".into(),
                sha256,
                size,
            };
            std::fs::write(&path, vec![2u8; size as usize]).unwrap();
            let e = upload(&store, &path, &listed).await.unwrap_err();
            assert!(e.to_string().contains("changed while publishing"), "{e:#}");
            let head = store.inner.head(&blob_key(&store, &listed.sha256)).await;
            assert!(head.is_err(), "a blob under the old checksum: {head:?}");
        }
    }

    #[tokio::test]
    async fn vectors_ship_with_a_generation_and_a_damaged_one_is_refused() {
        let (_model, src) = source();
        let store_dir = tempfile::tempdir().unwrap();
        let store = Store::open(&format!("file://{}", store_dir.path().display())).unwrap();
        publish(&store, src.path(), 0, 1).await.unwrap();
        let replica = tempfile::tempdir().unwrap();
        bootstrap(&store, replica.path(), 0).await.unwrap().unwrap();
        let shipped = crate::dense::store::read(&crate::dense::store::path(replica.path()))
            .unwrap()
            .unwrap();
        let original = crate::dense::store::read(&crate::dense::store::path(src.path()))
            .unwrap()
            .unwrap();
        assert_eq!(shipped, original);
        // The vectors' blob damaged in the store: the generation is refused, naming them.
        let sha = format!(
            "{:x}",
            <sha2::Sha256 as sha2::Digest>::digest(
                std::fs::read(crate::dense::store::path(src.path())).unwrap()
            )
        );
        let blob = walkdir::WalkDir::new(store_dir.path())
            .into_iter()
            .filter_map(Result::ok)
            .find(|e| e.file_name().to_string_lossy() == sha)
            .unwrap()
            .into_path();
        let mut bytes = std::fs::read(&blob).unwrap();
        let at = bytes.len() - 5;
        bytes[at] ^= 1;
        std::fs::write(&blob, &bytes).unwrap();
        let other = tempfile::tempdir().unwrap();
        let e = bootstrap(&store, other.path(), 0).await.unwrap_err();
        assert!(format!("{e:#}").contains("vectors.bin"), "{e:#}");
    }
}

#[cfg(test)]
mod repair_tests {
    use super::*;

    /// The blob file of `sha256` in the directory store under `root`.
    fn blob(root: &Path, sha256: &str) -> PathBuf {
        walkdir::WalkDir::new(root)
            .into_iter()
            .filter_map(Result::ok)
            .find(|e| e.file_name().to_string_lossy() == sha256)
            .unwrap()
            .into_path()
    }

    /// A blob lost after publishing (issue 31, store repair): a new replica starts on the
    /// last whole generation and says so; the next `publish` finds the blob by its size and
    /// uploads it again from the index, after which replicas start on the newest. A blob
    /// damaged in place (same size) passes the size check and is repaired by `--verify`
    /// (`Check::Contents`).
    #[tokio::test]
    async fn publish_repairs_damaged_blobs_and_a_new_replica_starts_on_the_last_whole_generation() {
        let src = tempfile::tempdir().unwrap();
        let index = crate::text::TextIndex::open_or_create(src.path(), None).unwrap();
        let doc = |i: usize| crate::corpus::Document {
            id: format!("d{i}"),
            title: format!("title {i}"),
            body: format!("the body of document {i}."),
            ..Default::default()
        };
        index.upsert((0..3).map(doc)).unwrap();
        let store_dir = tempfile::tempdir().unwrap();
        let store = Store::open(&format!("file://{}", store_dir.path().display())).unwrap();
        assert_eq!(
            publish(&store, src.path(), 0, 1).await.unwrap().generation,
            1
        );
        index.upsert([doc(3)]).unwrap();
        assert_eq!(
            publish(&store, src.path(), 0, 1).await.unwrap().generation,
            2
        );
        let (one, two) = (
            manifest(&store, 0, 1).await.unwrap(),
            manifest(&store, 0, 2).await.unwrap(),
        );
        let new_file = two
            .files
            .iter()
            .find(|f| !one.files.iter().any(|o| o.sha256 == f.sha256) && f.size > 8)
            .unwrap()
            .clone();
        let lost = blob(store_dir.path(), &new_file.sha256);
        let bytes = std::fs::read(&lost).unwrap();
        std::fs::write(&lost, &bytes[..bytes.len() / 2]).unwrap();

        let replica = tempfile::tempdir().unwrap();
        let applied = bootstrap(&store, replica.path(), 0).await.unwrap().unwrap();
        assert_eq!(applied.generation, 1, "the last whole generation");

        let p = publish(&store, src.path(), 0, 1).await.unwrap();
        assert!(p.unchanged);
        assert_eq!(p.repaired.len(), 1, "{:?}", p.repaired);
        assert!(
            p.repaired[0].starts_with(&new_file.path),
            "{:?}",
            p.repaired
        );
        assert_eq!(std::fs::read(&lost).unwrap(), bytes);
        let fresh = tempfile::tempdir().unwrap();
        let applied = bootstrap(&store, fresh.path(), 0).await.unwrap().unwrap();
        assert_eq!(applied.generation, 2);
        // The replica on generation 1 moves to 2 as well.
        let applied = bootstrap(&store, replica.path(), 0).await.unwrap().unwrap();
        assert_eq!(applied.generation, 2);

        // Damaged in place, same size: only reading it back finds it.
        let kept = two.files.iter().find(|f| f.path == "index.toml").unwrap();
        let flipped = blob(store_dir.path(), &kept.sha256);
        let mut bytes = std::fs::read(&flipped).unwrap();
        bytes[0] ^= 0x20;
        std::fs::write(&flipped, &bytes).unwrap();
        let p = publish(&store, src.path(), 0, 1).await.unwrap();
        assert!(p.repaired.is_empty(), "{:?}", p.repaired);
        let found = verify(&store, &|| {}).await.unwrap();
        assert_eq!((found.len(), found[0].generation), (1, 2));
        assert_eq!(found[0].damaged.len(), 1, "{:?}", found[0].damaged);
        assert!(found[0].damaged[0].starts_with("index.toml: its SHA-256 is"));
        let p = publish_checked(&store, src.path(), 0, 1, Check::Contents)
            .await
            .unwrap();
        assert_eq!(p.repaired.len(), 1, "{:?}", p.repaired);
        assert!(p.repaired[0].starts_with("index.toml"), "{:?}", p.repaired);
        let other = tempfile::tempdir().unwrap();
        let applied = bootstrap(&store, other.path(), 0).await.unwrap().unwrap();
        assert_eq!(applied.generation, 2);
        assert!(verify(&store, &|| {}).await.unwrap()[0].damaged.is_empty());
    }
}
