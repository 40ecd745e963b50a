//! The link-score file stored beside an index. Two lines:
//! 1. a JSON header `{"format":"rankd-link-scores","version":2,"manifest_hash":..,"nodes":..,
//!    "body_sha256":..}` — what the file is, which index it belongs to, a checksum;
//! 2. the JSON body ([`LinkScores`]); score vectors are stored as the IEEE-754 bit patterns of
//!    their f64 values ([`f64_bits`](super::f64_bits)), because serde_json's default float
//!    parser may be off by one ulp and stored scores must reload bit for bit.
//!
//! Written atomically (`crate::durable`: temp file in the same directory, fsync, rename, fsync
//! of the directory), so a reader sees the old file or the new one, never a torn one. Loading
//! checks format, version, checksum, the caller's manifest hash, matching lengths and finite
//! values.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{GraphError, LinkScores, Result};

pub(crate) const FORMAT: &str = "rankd-link-scores";
/// 2: adds SimRank's diagonal correction (`LinkScores::simrank`); a version-1 file is refused
/// with "run `rankd graph` again" (serving then starts without link scores and says so).
pub(crate) const VERSION: u32 = 2;

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    manifest_hash: String,
    nodes: usize,
    body_sha256: String,
}

fn error(path: &Path, message: impl Into<String>) -> GraphError {
    GraphError::Sidecar {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Writes `scores` for the index identified by `manifest_hash`, atomically.
pub fn write(path: &Path, manifest_hash: &str, scores: &LinkScores) -> Result<()> {
    validate(scores).map_err(|m| error(path, format!("refusing to write: {m}")))?;
    let body = serde_json::to_vec(scores).map_err(|e| error(path, e.to_string()))?;
    let header = Header {
        format: FORMAT.to_owned(),
        version: VERSION,
        manifest_hash: manifest_hash.to_owned(),
        nodes: scores.n(),
        body_sha256: format!("{:x}", Sha256::digest(&body)),
    };
    crate::durable::write_atomic_with(path, |f| {
        serde_json::to_writer(&mut *f, &header)?;
        f.write_all(b"\n")?;
        f.write_all(&body)
    })
    .map_err(|e| error(path, format!("{e:#}")))
}

/// The index key (`manifest_hash`) a link-score file was written for, from its header alone.
pub(crate) fn manifest_hash(path: &Path) -> Result<String> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| error(path, e.to_string()))?;
    let mut line = String::new();
    std::io::BufReader::new(file)
        .read_line(&mut line)
        .map_err(|e| error(path, e.to_string()))?;
    let header: Header = serde_json::from_str(line.trim_end()).map_err(|e| {
        error(
            path,
            format!("unreadable header ({e}); not a link-score file"),
        )
    })?;
    Ok(header.manifest_hash)
}

/// Reads a link-score file. With `expected_manifest_hash`, a file written for another index is
/// an error (the scores would be attached to the wrong documents).
pub fn read(path: &Path, expected_manifest_hash: Option<&str>) -> Result<LinkScores> {
    let bytes = std::fs::read(path).map_err(|e| error(path, e.to_string()))?;
    let split = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| error(path, "no header line; not a link-score file"))?;
    let header: Header = serde_json::from_slice(&bytes[..split]).map_err(|e| {
        error(
            path,
            format!("unreadable header ({e}); not a link-score file"),
        )
    })?;
    if header.format != FORMAT {
        return Err(error(
            path,
            format!("format `{}`, expected `{FORMAT}`", header.format),
        ));
    }
    if header.version != VERSION {
        return Err(error(
            path,
            format!(
                "version {} but this rankd reads version {VERSION}; run `rankd graph` again",
                header.version
            ),
        ));
    }
    if let Some(expected) = expected_manifest_hash {
        if header.manifest_hash != expected {
            return Err(error(
                path,
                format!(
                    "written for index {} but the index is {expected}; run `rankd graph` again",
                    header.manifest_hash
                ),
            ));
        }
    }
    let body = &bytes[split + 1..];
    if format!("{:x}", Sha256::digest(body)) != header.body_sha256 {
        return Err(error(
            path,
            "checksum mismatch: the file is corrupt or truncated",
        ));
    }
    let scores: LinkScores =
        serde_json::from_slice(body).map_err(|e| error(path, format!("corrupt body: {e}")))?;
    if scores.n() != header.nodes {
        return Err(error(
            path,
            format!(
                "header says {} nodes, body has {}",
                header.nodes,
                scores.n()
            ),
        ));
    }
    validate(&scores).map_err(|m| error(path, m))?;
    Ok(scores)
}

/// Lengths agree, values are finite, the graph is well-formed.
fn validate(s: &LinkScores) -> std::result::Result<(), String> {
    let n = s.n();
    let vectors = [
        ("pagerank", &s.pagerank),
        ("inverse_pagerank", &s.inverse_pagerank),
        ("trustrank", &s.trustrank),
        ("spam_mass", &s.spam_mass),
        ("anti_trustrank", &s.anti_trustrank),
        ("hits_hub", &s.hits_hub),
        ("hits_authority", &s.hits_authority),
        ("salsa_hub", &s.salsa_hub),
        ("salsa_authority", &s.salsa_authority),
        ("simrank diagonal", &s.simrank.values),
    ];
    for (name, v) in vectors {
        if v.len() != n {
            return Err(format!("{name} has {} entries for {n} nodes", v.len()));
        }
        if let Some(x) = v.iter().find(|x| !x.is_finite()) {
            return Err(format!("{name} contains {x}"));
        }
    }
    if s.in_degree.len() != n || s.out_degree.len() != n {
        return Err("degree vectors have the wrong length".into());
    }
    if s.out_offsets.len() != n + 1 {
        return Err("graph offsets have the wrong length".into());
    }
    match &s.part {
        None => {
            s.graph().map_err(|e| format!("graph: {e}"))?;
        }
        Some(part) => validate_part(s, part)?,
    }
    Ok(())
}

/// A shard's part: its nodes ascending within the whole graph, each out-link list ascending,
/// without repeats or self-links, and inside the whole graph (what the whole graph's
/// adjacency gives, [`LinkScores::part`]).
fn validate_part(
    s: &LinkScores,
    part: &super::scores::ShardPart,
) -> std::result::Result<(), String> {
    if part.global.len() != s.n() {
        return Err(format!(
            "the part lists {} nodes for {} entries",
            part.global.len(),
            s.n()
        ));
    }
    if part.global.windows(2).any(|w| w[0] >= w[1])
        || part
            .global
            .last()
            .is_some_and(|&u| u as usize >= part.nodes)
    {
        return Err("the part's nodes must ascend within the whole graph".into());
    }
    if s.out_offsets.first() != Some(&0)
        || s.out_offsets.last() != Some(&s.out_targets.len())
        || s.out_offsets.windows(2).any(|w| w[0] > w[1])
    {
        return Err("graph offsets must start at 0, not decrease and end at the edge count".into());
    }
    for i in 0..s.n() as u32 {
        let out = s.out_links(i);
        if out.windows(2).any(|w| w[0] >= w[1])
            || out.last().is_some_and(|&v| v as usize >= part.nodes)
            || out.contains(&s.global(i))
        {
            return Err(format!(
                "the out-links of node {} are not a simple graph's",
                s.global(i)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::testutil::random_graph;
    use crate::graph::{compute_link_scores, LinkScoreOptions};

    fn scores() -> LinkScores {
        let g = random_graph(9, 30, 0.1);
        let keys = (0..30).map(|i| format!("d{i}")).collect();
        compute_link_scores(&g, keys, &LinkScoreOptions::default(), &mut |_| {}).unwrap()
    }

    #[test]
    fn round_trips_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("links.json");
        let s = scores();
        write(&path, "abc123", &s).unwrap();
        assert_eq!(manifest_hash(&path).unwrap(), "abc123");
        let mut back = read(&path, Some("abc123")).unwrap();
        // Reports hold plain JSON floats (serde_json may round the last ulp); scores are exact.
        for (name, r) in &s.reports {
            let b = back.reports.get_mut(name).unwrap();
            assert!((b.residual - r.residual).abs() <= 1e-15 * r.residual.abs());
            b.residual = r.residual;
        }
        assert_eq!(back, s);
        // Overwrite in place.
        write(&path, "def456", &s).unwrap();
        assert!(read(&path, Some("def456")).is_ok());
    }

    /// A shard's part keeps its nodes' scores and out-links under whole-graph numbers, round
    /// trips, and a part that is not one is refused.
    #[test]
    fn shard_parts_round_trip_and_are_checked() {
        let s = scores();
        let g = s.graph().unwrap();
        let nodes = [1u32, 4, 7, 29];
        let part = s.part(&nodes).unwrap();
        assert_eq!((part.n(), part.total_nodes(), s.total_nodes()), (4, 30, 30));
        for (i, &u) in nodes.iter().enumerate() {
            let (i, u8) = (i as u32, u as usize);
            assert_eq!(part.global(i), u);
            assert_eq!(part.keys[i as usize], s.keys[u8]);
            assert_eq!(part.pagerank[i as usize], s.pagerank[u8]);
            assert_eq!(part.salsa_authority[i as usize], s.salsa_authority[u8]);
            assert_eq!(part.in_degree[i as usize], s.in_degree[u8]);
            assert_eq!(part.out_links(i), g.out(u));
        }
        assert!(
            nodes.iter().any(|&u| g.out(u).iter().any(|&v| v >= 4)),
            "some out-link is numbered beyond the part's own entries"
        );
        assert!(part.part(&[0]).is_err(), "a part of a part");
        assert!(s.part(&[4, 1]).is_err(), "nodes out of order");
        assert!(s.part(&[30]).is_err(), "a node outside the graph");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("links.json");
        write(&path, "abc123", &part).unwrap();
        let back = read(&path, Some("abc123")).unwrap();
        assert_eq!(back.part, part.part);
        assert_eq!(back.pagerank, part.pagerank);
        assert_eq!(
            (back.out_offsets, back.out_targets),
            (part.out_offsets.clone(), part.out_targets.clone())
        );

        let mut unordered = part.clone();
        unordered.part.as_mut().unwrap().global.swap(0, 1);
        let err = write(&path, "abc123", &unordered).unwrap_err().to_string();
        assert!(err.contains("ascend"), "{err}");
        let mut outside = part.clone();
        outside.part.as_mut().unwrap().nodes = 10;
        assert!(write(&path, "abc123", &outside).is_err());
        let mut self_link = part.clone();
        let own = self_link.global(0);
        self_link.out_targets[0] = own;
        let err = write(&path, "abc123", &self_link).unwrap_err().to_string();
        assert!(err.contains("not a simple graph"), "{err}");
    }

    #[test]
    fn rejects_wrong_index_version_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("links.json");
        write(&path, "abc123", &scores()).unwrap();
        let err = read(&path, Some("other")).unwrap_err().to_string();
        assert!(err.contains("written for index abc123"), "{err}");

        let text = std::fs::read_to_string(&path).unwrap();
        // A file of the previous version (before SimRank's diagonal) asks for a recompute.
        let old = text.replacen("\"version\":2", "\"version\":1", 1);
        assert_ne!(old, text);
        std::fs::write(&path, old).unwrap();
        let err = read(&path, None).unwrap_err().to_string();
        assert!(
            err.contains("version 1") && err.contains("run `rankd graph` again"),
            "{err}"
        );

        let corrupt = text.replacen("\"pagerank\":[4", "\"pagerank\":[5", 1);
        assert_ne!(corrupt, text);
        std::fs::write(&path, corrupt).unwrap();
        assert!(read(&path, None)
            .unwrap_err()
            .to_string()
            .contains("checksum"));

        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        assert!(read(&path, None).is_err());
        std::fs::write(&path, "garbage").unwrap();
        assert!(read(&path, None)
            .unwrap_err()
            .to_string()
            .contains("not a link-score file"));
        assert!(read(&dir.path().join("missing"), None).is_err());
    }

    #[test]
    fn refuses_to_write_inconsistent_scores() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = scores();
        s.pagerank[0] = f64::NAN;
        assert!(write(&dir.path().join("x"), "h", &s).is_err());
    }
}
