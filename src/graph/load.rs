//! Loaders for bare graph files (the formats in `../shared/data/graphs`), so every algorithm
//! can also run on a graph without an index.
//!
//! - **Edge list** (SNAP, e.g. `wiki-Vote.txt`): `from to` per line (tabs or spaces), `#` or
//!   `%` comment lines, CRLF tolerated. Ids are any non-negative integers, not necessarily
//!   contiguous; they are mapped to `0..n` in order of first appearance.
//! - **Hollins** (`hollins.dat`): a header `n m k`, then `n` lines `i URL` (i = 1..n), then `m`
//!   lines `src dst` with 1-based ids.
//!
//! Errors name the file and line. Self-loops and duplicate edges are dropped (SPEC §2) and
//! counted in [`LabeledGraph::cleanup`].

use std::collections::HashMap;
use std::path::Path;

use super::csr::EdgeCleanup;
use super::{Csr, GraphError, Result};

/// A graph read from a file, with each node's original label (and URL when the file has one).
#[derive(Debug, Clone)]
pub struct LabeledGraph {
    pub csr: Csr,
    /// `labels[i]` is node i's id in the file.
    pub labels: Vec<String>,
    pub urls: Option<Vec<String>>,
    pub cleanup: EdgeCleanup,
}

impl LabeledGraph {
    /// The node whose file id is `label`.
    pub fn node(&self, label: &str) -> Option<u32> {
        self.labels
            .iter()
            .position(|l| l == label)
            .map(|i| i as u32)
    }
}

/// Loads a graph file, recognising the Hollins layout by its three-number header and taking
/// anything else as an edge list.
pub fn load_graph_file(path: &Path) -> Result<LabeledGraph> {
    let text = std::fs::read_to_string(path).map_err(|source| GraphError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let name = path.display().to_string();
    let first = data_lines(&text).next();
    match first {
        Some((_, line)) if line.split_whitespace().count() == 3 => parse_hollins(&name, &text),
        _ => parse_edge_list(&name, &text),
    }
}

/// Non-blank, non-comment lines with their 1-based line numbers, line endings trimmed.
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r').trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#') && !l.starts_with('%'))
}

fn parse_error(path: &str, line: usize, message: String) -> GraphError {
    GraphError::Parse {
        path: path.to_owned(),
        line,
        message,
    }
}

fn number(path: &str, line: usize, field: &str, what: &str) -> Result<u64> {
    field.parse().map_err(|_| {
        parse_error(
            path,
            line,
            format!("{what} `{field}` is not a non-negative integer"),
        )
    })
}

/// Maps the lines of a SNAP edge list to node ids, numbering nodes in order of first
/// appearance: the one parser of [`parse_edge_list`] and [`stream_edge_list`].
#[derive(Default)]
struct EdgeListParser {
    ids: HashMap<u64, u32>,
    labels: Vec<String>,
}

impl EdgeListParser {
    fn line(&mut self, path: &str, line: usize, content: &str) -> Result<(u32, u32)> {
        let mut fields = content.split_whitespace();
        let (Some(s), Some(t), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(parse_error(
                path,
                line,
                format!(
                    "expected `from to`, found {} fields",
                    content.split_whitespace().count()
                ),
            ));
        };
        let s = self.node(path, line, s, "source id")?;
        let t = self.node(path, line, t, "target id")?;
        Ok((s, t))
    }

    fn node(&mut self, path: &str, line: usize, field: &str, what: &str) -> Result<u32> {
        let id = number(path, line, field, what)?;
        if let Some(&node) = self.ids.get(&id) {
            return Ok(node);
        }
        if self.labels.len() >= u32::MAX as usize {
            return Err(parse_error(path, line, "more than 2^32 − 1 nodes".into()));
        }
        self.labels.push(id.to_string());
        let node = (self.labels.len() - 1) as u32;
        self.ids.insert(id, node);
        Ok(node)
    }
}

/// Parses a SNAP-style edge list (see the module docs).
pub(crate) fn parse_edge_list(path: &str, text: &str) -> Result<LabeledGraph> {
    let mut parser = EdgeListParser::default();
    let mut edges = Vec::new();
    for (line, content) in data_lines(text) {
        edges.push(parser.line(path, line, content)?);
    }
    let (csr, cleanup) = Csr::from_edges(parser.labels.len(), &edges)?;
    Ok(LabeledGraph {
        csr,
        labels: parser.labels,
        urls: None,
        cleanup,
    })
}

/// Reads a SNAP edge list line by line without holding it, calling `emit(source, target)` for
/// each edge (self-loops and duplicates included); returns the node labels.
pub(crate) fn stream_edge_list(path: &Path, mut emit: impl FnMut(u32, u32)) -> Result<Vec<String>> {
    use std::io::BufRead;
    let io = |source| GraphError::Io {
        path: path.display().to_string(),
        source,
    };
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(io)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut parser = EdgeListParser::default();
    let mut buf = String::new();
    let mut line = 0;
    loop {
        buf.clear();
        if reader.read_line(&mut buf).map_err(io)? == 0 {
            break;
        }
        line += 1;
        let content = buf.trim_end_matches(['\n', '\r']).trim();
        if content.is_empty() || content.starts_with('#') || content.starts_with('%') {
            continue;
        }
        let (s, t) = parser.line(&name, line, content)?;
        emit(s, t);
    }
    Ok(parser.labels)
}

/// Whether `path` is in the Hollins layout (its first data line has three numbers).
pub(crate) fn is_hollins(path: &Path) -> Result<bool> {
    use std::io::BufRead;
    let io = |source| GraphError::Io {
        path: path.display().to_string(),
        source,
    };
    let reader = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?);
    for line in reader.lines() {
        let line = line.map_err(io)?;
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with('%') {
            continue;
        }
        return Ok(l.split_whitespace().count() == 3);
    }
    Ok(false)
}

/// Parses the Hollins layout (see the module docs).
pub(crate) fn parse_hollins(path: &str, text: &str) -> Result<LabeledGraph> {
    let mut lines = data_lines(text);
    let (hline, header) = lines
        .next()
        .ok_or_else(|| parse_error(path, 1, "empty file".into()))?;
    let h: Vec<&str> = header.split_whitespace().collect();
    if h.len() != 3 {
        return Err(parse_error(
            path,
            hline,
            "expected header `nodes edges 1`".into(),
        ));
    }
    let n = number(path, hline, h[0], "node count")? as usize;
    let m = number(path, hline, h[1], "edge count")? as usize;
    if n > u32::MAX as usize {
        return Err(parse_error(
            path,
            hline,
            format!("{n} nodes do not fit u32 ids"),
        ));
    }
    let mut urls = Vec::with_capacity(n);
    for i in 1..=n {
        let (line, content) = lines.next().ok_or_else(|| {
            parse_error(
                path,
                hline,
                format!("file ends after {} of {n} node lines", i - 1),
            )
        })?;
        let (id, url) = content
            .split_once(char::is_whitespace)
            .unwrap_or((content, ""));
        if number(path, line, id, "node id")? != i as u64 {
            return Err(parse_error(
                path,
                line,
                format!("expected node line {i}, found id {id}"),
            ));
        }
        urls.push(url.trim().to_owned());
    }
    let mut edges = Vec::with_capacity(m);
    let mut last_line = hline;
    for (line, content) in lines {
        last_line = line;
        let fields: Vec<&str> = content.split_whitespace().collect();
        if fields.len() != 2 {
            return Err(parse_error(
                path,
                line,
                format!("expected `src dst`, found {} fields", fields.len()),
            ));
        }
        let node = |field: &str, what: &str| -> Result<u32> {
            let id = number(path, line, field, what)?;
            if id == 0 || id > n as u64 {
                return Err(parse_error(
                    path,
                    line,
                    format!("{what} {id} is outside 1..={n}"),
                ));
            }
            Ok((id - 1) as u32)
        };
        edges.push((node(fields[0], "source id")?, node(fields[1], "target id")?));
    }
    if edges.len() != m {
        return Err(parse_error(
            path,
            last_line,
            format!("header promises {m} edges, file has {}", edges.len()),
        ));
    }
    let (csr, cleanup) = Csr::from_edges(n, &edges)?;
    Ok(LabeledGraph {
        csr,
        labels: (1..=n).map(|i| i.to_string()).collect(),
        urls: Some(urls),
        cleanup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_list_with_crlf_comments_and_sparse_ids() {
        let g = parse_edge_list(
            "t",
            "# c\r\n30\t1412\r\n\r\n30 7\r\n7\t30\r\n7 7\r\n30 7\r\n",
        )
        .unwrap();
        assert_eq!(g.labels, vec!["30", "1412", "7"]);
        assert_eq!(g.csr.m(), 3);
        assert_eq!(
            g.cleanup,
            EdgeCleanup {
                self_loops: 1,
                duplicates: 1
            }
        );
        assert_eq!(g.node("7"), Some(2));
    }

    #[test]
    fn edge_list_errors_name_the_line() {
        let err = parse_edge_list("g.txt", "# x\n1 2\n3 x\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "g.txt:3: target id `x` is not a non-negative integer"
        );
        let err = parse_edge_list("g.txt", "1 2 3\n").unwrap_err();
        assert!(
            err.to_string().starts_with("g.txt:1: expected `from to`"),
            "{err}"
        );
        let err = parse_edge_list("g.txt", "-1 2\n").unwrap_err();
        assert!(err.to_string().starts_with("g.txt:1:"), "{err}");
    }

    #[test]
    fn empty_edge_list_is_an_empty_graph() {
        let g = parse_edge_list("t", "# nothing\n").unwrap();
        assert_eq!((g.csr.n(), g.csr.m()), (0, 0));
    }

    #[test]
    fn hollins_layout_and_its_errors() {
        let ok = "3 2 1\n1 http://a/ \n2 http://b/\r\n3 http://c/\n1 2\n3 1\n";
        let g = parse_hollins("h", ok).unwrap();
        assert_eq!(g.csr.edges().collect::<Vec<_>>(), vec![(0, 1), (2, 0)]);
        assert_eq!(g.urls.as_ref().unwrap()[0], "http://a/");
        let out_of_range = "2 1 1\n1 a\n2 b\n1 3\n";
        assert_eq!(
            parse_hollins("h", out_of_range).unwrap_err().to_string(),
            "h:4: target id 3 is outside 1..=2"
        );
        let short = "2 2 1\n1 a\n2 b\n1 2\n";
        assert!(parse_hollins("h", short)
            .unwrap_err()
            .to_string()
            .contains("promises 2 edges"));
        let missing_nodes = "3 0 1\n1 a\n";
        assert!(parse_hollins("h", missing_nodes).is_err());
    }

    #[test]
    fn real_files_load() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/graphs/");
        let h = load_graph_file(Path::new(&format!("{dir}hollins.dat"))).unwrap();
        assert_eq!((h.csr.n(), h.csr.m()), (6012, 23875));
        let dangling = (0..6012).filter(|&u| h.csr.out_degree(u) == 0).count();
        assert_eq!(dangling, 3189);
        assert_eq!(h.urls.as_ref().unwrap()[1], "http://www.hollins.edu/");
        let w = load_graph_file(Path::new(&format!("{dir}wiki-Vote.txt"))).unwrap();
        assert_eq!((w.csr.n(), w.csr.m()), (7115, 103689));
        let missing = load_graph_file(Path::new("/nonexistent/graph.txt")).unwrap_err();
        assert!(
            missing.to_string().starts_with("/nonexistent/graph.txt:"),
            "{missing}"
        );
    }
}
