//! The vector file stored beside an index (`vectors.bin` in the data directory).
//!
//! Layout:
//! 1. one line of JSON, the [`Header`]: what the file is, the embedder it came from (its
//!    fingerprint, [`super::fingerprint`]), the text each vector embeds, the dimension, the
//!    row count and the body's sha256;
//! 2. the body: every row's document id (little-endian `u32` byte length, UTF-8 bytes) and
//!    its text hash (`u64`, [`super::text_hash`]), rows in id order; then every row's vector,
//!    `dim` little-endian `f32`s each.
//!
//! Binary rather than JSON: 32,900 vectors of 384 floats are 50 MB as bytes and three times
//! that as decimal text, which would also need parsing bit for bit. Written atomically
//! (`crate::durable`: temporary file, fsync, rename, fsync of the directory), so a reader sees
//! the previous file or the new one, never a torn one, across crashes and `kill -9`. Loading
//! checks the format, version, checksum, sizes, id order and that every vector is finite and
//! of unit length; any failure names the file and refuses it whole.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{DenseError, Vectors};

pub(crate) const FORMAT: &str = "rankd-vectors";
pub(crate) const VERSION: u32 = 1;
/// The file's name in a data directory.
pub const FILE_NAME: &str = "vectors.bin";

/// What the first line of the file says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// [`super::fingerprint`] of the embedder's directory.
    pub model: String,
    /// The embedder's directory when the file was written (for messages only).
    pub model_dir: String,
    /// What each vector embeds ([`super::DocText::name`]).
    pub text: String,
    pub dim: usize,
    pub rows: usize,
    pub body_sha256: String,
}

/// The vector file of the data directory `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

fn corrupt(path: &Path, message: impl Into<String>) -> DenseError {
    DenseError::Corrupt {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Writes `vectors` to `path` atomically.
pub fn write(path: &Path, vectors: &Vectors) -> Result<(), DenseError> {
    let mut body = Vec::with_capacity(vectors.ids.len() * 48 + vectors.data.len() * 4);
    for (id, hash) in vectors.ids.iter().zip(&vectors.text_hashes) {
        body.extend_from_slice(&(id.len() as u32).to_le_bytes());
        body.extend_from_slice(id.as_bytes());
        body.extend_from_slice(&hash.to_le_bytes());
    }
    for x in &vectors.data {
        body.extend_from_slice(&x.to_le_bytes());
    }
    let header = Header {
        format: FORMAT.to_owned(),
        version: VERSION,
        model: vectors.model.clone(),
        model_dir: vectors.model_dir.clone(),
        text: vectors.text.clone(),
        dim: vectors.dim,
        rows: vectors.ids.len(),
        body_sha256: format!("{:x}", Sha256::digest(&body)),
    };
    crate::durable::write_atomic_with(path, |f| {
        serde_json::to_writer(&mut *f, &header)?;
        f.write_all(b"\n")?;
        f.write_all(&body)
    })
    .map_err(|e| DenseError::Io {
        path: path.to_path_buf(),
        message: format!("{e:#}"),
    })
}

/// The bytes of the file at `path`; `Ok(None)` when there is none.
pub(super) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, DenseError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(DenseError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

/// Reads the vector file at `path`; `Ok(None)` when there is none.
pub fn read(path: &Path) -> Result<Option<Vectors>, DenseError> {
    let Some(bytes) = read_optional(path)? else {
        return Ok(None);
    };
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| corrupt(path, "no header line"))?;
    let header: Header = serde_json::from_slice(&bytes[..newline])
        .map_err(|e| corrupt(path, format!("header: {e}")))?;
    if header.format != FORMAT {
        return Err(corrupt(path, format!("not a {FORMAT} file")));
    }
    if header.version != VERSION {
        return Err(corrupt(
            path,
            format!(
                "version {} (this rankd reads {VERSION}); run `rankd embed` again",
                header.version
            ),
        ));
    }
    let body = &bytes[newline + 1..];
    if format!("{:x}", Sha256::digest(body)) != header.body_sha256 {
        return Err(corrupt(
            path,
            "checksum mismatch: the file is damaged; run `rankd embed` again",
        ));
    }
    if header.dim == 0 || header.dim > 65_536 {
        return Err(corrupt(path, format!("dimension {}", header.dim)));
    }
    let mut rest = body;
    let mut take = |n: usize| -> Result<&[u8], DenseError> {
        if rest.len() < n {
            return Err(corrupt(path, "the body ends early"));
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let mut ids = Vec::with_capacity(header.rows.min(body.len() / 12));
    let mut text_hashes = Vec::with_capacity(ids.capacity());
    for row in 0..header.rows {
        let len = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
        let id = std::str::from_utf8(take(len)?)
            .map_err(|_| corrupt(path, format!("row {row}: the id is not UTF-8")))?
            .to_owned();
        if ids.last().is_some_and(|prev: &String| *prev >= id) {
            return Err(corrupt(path, format!("row {row}: ids out of order")));
        }
        ids.push(id);
        text_hashes.push(u64::from_le_bytes(take(8)?.try_into().expect("8 bytes")));
    }
    let floats = take(header.rows * header.dim * 4)?;
    if !rest.is_empty() {
        return Err(corrupt(path, "bytes after the last vector"));
    }
    let data: Vec<f32> = floats
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    for (row, v) in data.chunks_exact(header.dim).enumerate() {
        let norm: f32 = v.iter().map(|x| x * x).sum();
        if !norm.is_finite() || (norm - 1.0).abs() > 1e-3 {
            return Err(corrupt(
                path,
                format!("row {row} ({}) is not a unit vector", ids[row]),
            ));
        }
    }
    Ok(Some(Vectors {
        model: header.model,
        model_dir: header.model_dir,
        text: header.text,
        dim: header.dim,
        ids,
        text_hashes,
        data,
    }))
}
