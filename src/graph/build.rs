//! The link graph of indexed documents (SPEC §2): URL normalisation, link resolution to
//! documents, duplicates once, no self-links, optional same-host filter (Nutch LinkRank, book
//! §4.4) and optional nodes for pages outside the index.

use std::collections::{HashMap, HashSet};

use petgraph::graph::{DiGraph, NodeIndex};
use url::Url;

use super::{Csr, Result};
use crate::corpus::Document;

/// One document's view for graph building: its key, its URL (if any) and its out-links, each
/// an absolute URL or the key of another document.
#[derive(Debug, Clone, Copy)]
pub struct DocLinks<'a> {
    pub key: &'a str,
    pub url: Option<&'a str>,
    pub links: &'a [String],
}

impl<'a> From<&'a Document> for DocLinks<'a> {
    fn from(d: &'a Document) -> Self {
        DocLinks {
            key: &d.id,
            url: d.url.as_deref(),
            links: &d.links,
        }
    }
}

/// Build options; the defaults follow SPEC §2.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildOptions {
    /// Drop links whose source and target have the same host (Nutch LinkRank).
    pub ignore_same_host: bool,
    /// Keep links to pages outside the index as extra (unindexed) nodes instead of dropping them.
    pub keep_unindexed: bool,
}

/// A node of the link graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkNode {
    /// The document key, or for an unindexed page its normalised URL (or the unknown id).
    pub key: String,
    /// Normalised URL, when known.
    pub url: Option<String>,
    /// False for pages outside the index (only with `keep_unindexed`).
    pub indexed: bool,
}

/// Counts of what building did with the links it saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildStats {
    pub links_seen: usize,
    pub edges: usize,
    pub self_links: usize,
    pub duplicates: usize,
    pub same_host: usize,
    /// Links to pages outside the index (unknown URL or key) that were dropped.
    pub unindexed_dropped: usize,
    /// Nodes created for pages outside the index (`keep_unindexed`).
    pub unindexed_nodes: usize,
}

/// The link graph: node `i` of `graph` is `nodes[i]`.
#[derive(Debug, Clone, Default)]
pub struct LinkGraph {
    pub nodes: Vec<LinkNode>,
    pub graph: DiGraph<(), (), u32>,
    pub stats: BuildStats,
}

impl LinkGraph {
    /// The CSR form for the iterative algorithms (node ids are the same).
    pub fn to_csr(&self) -> Csr {
        let edges: Vec<(u32, u32)> = self
            .graph
            .raw_edges()
            .iter()
            .map(|e| (e.source().index() as u32, e.target().index() as u32))
            .collect();
        Csr::from_edges(self.nodes.len(), &edges)
            .expect("edges of a LinkGraph are simple and in range")
            .0
    }

    /// Number of weakly connected components (petgraph).
    pub fn components(&self) -> usize {
        petgraph::algo::connected_components(&self.graph)
    }

    /// The node of a document key.
    pub fn node_of(&self, key: &str) -> Option<u32> {
        self.nodes
            .iter()
            .position(|n| n.key == key)
            .map(|i| i as u32)
    }
}

/// Normalises an absolute URL (SPEC §2): scheme and host lowercased, default port dropped,
/// `.`/`..` segments resolved (all done by the WHATWG parser of the `url` crate), fragment
/// dropped. `None` when `s` is not an absolute URL with a host.
pub(crate) fn normalize_url(s: &str) -> Option<Url> {
    let mut url = Url::parse(s.trim()).ok()?;
    if !url.has_host() {
        return None;
    }
    url.set_fragment(None);
    Some(url)
}

/// Builds the link graph. A later document with the same key replaces an earlier one (as in
/// the index). When two documents share a URL, links to that URL go to the first of them.
pub fn build_link_graph<'a>(
    docs: impl IntoIterator<Item = DocLinks<'a>>,
    options: &BuildOptions,
) -> Result<LinkGraph> {
    let mut by_key: HashMap<&'a str, usize> = HashMap::new();
    let mut docs_in: Vec<DocLinks<'a>> = Vec::new();
    for d in docs {
        match by_key.get(d.key) {
            Some(&i) => docs_in[i] = d,
            None => {
                by_key.insert(d.key, docs_in.len());
                docs_in.push(d);
            }
        }
    }
    let mut nodes: Vec<LinkNode> = Vec::with_capacity(docs_in.len());
    let mut hosts: Vec<Option<String>> = Vec::with_capacity(docs_in.len());
    let mut by_url: HashMap<String, usize> = HashMap::new();
    for (i, d) in docs_in.iter().enumerate() {
        let url = d.url.and_then(normalize_url);
        if let Some(u) = &url {
            by_url.entry(u.to_string()).or_insert(i);
        }
        hosts.push(url.as_ref().and_then(|u| u.host_str().map(str::to_owned)));
        nodes.push(LinkNode {
            key: d.key.to_owned(),
            url: url.map(String::from),
            indexed: true,
        });
    }

    let mut stats = BuildStats::default();
    let mut unindexed: HashMap<String, usize> = HashMap::new();
    let mut edges: HashSet<(usize, usize)> = HashSet::new();
    let mut edge_list: Vec<(usize, usize)> = Vec::new();
    for (src, d) in docs_in.iter().enumerate() {
        for link in d.links {
            stats.links_seen += 1;
            let url = normalize_url(link);
            // A URL resolves through documents' URLs first, then as a key (documents whose
            // id is their URL but that carry no `url` field).
            let target = url
                .as_ref()
                .and_then(|u| by_url.get(u.as_str()).or_else(|| by_key.get(u.as_str())))
                .or_else(|| by_key.get(link.as_str()))
                .copied();
            let target_host = match (target, &url) {
                (Some(t), _) => hosts[t].clone(),
                (None, Some(u)) => u.host_str().map(str::to_owned),
                (None, None) => None,
            };
            if options.ignore_same_host && hosts[src].is_some() && hosts[src] == target_host {
                stats.same_host += 1;
                continue;
            }
            let target = match target {
                Some(t) => t,
                None if options.keep_unindexed => {
                    let name = url.as_ref().map_or_else(|| link.clone(), Url::to_string);
                    *unindexed.entry(name.clone()).or_insert_with(|| {
                        stats.unindexed_nodes += 1;
                        nodes.push(LinkNode {
                            key: name,
                            url: url.as_ref().map(Url::to_string),
                            indexed: false,
                        });
                        hosts.push(target_host.clone());
                        nodes.len() - 1
                    })
                }
                None => {
                    stats.unindexed_dropped += 1;
                    continue;
                }
            };
            if target == src {
                stats.self_links += 1;
            } else if !edges.insert((src, target)) {
                stats.duplicates += 1;
            } else {
                edge_list.push((src, target));
            }
        }
    }
    if nodes.len() > u32::MAX as usize {
        return Err(super::GraphError::TooLarge {
            what: "a link graph",
            n: nodes.len(),
            limit: u32::MAX as usize,
        });
    }
    let mut graph = DiGraph::with_capacity(nodes.len(), edge_list.len());
    for _ in &nodes {
        graph.add_node(());
    }
    for (s, t) in edge_list {
        graph.add_edge(NodeIndex::new(s), NodeIndex::new(t), ());
    }
    stats.edges = graph.edge_count();
    Ok(LinkGraph {
        nodes,
        graph,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(key: &str, url: Option<&str>, links: &[&str]) -> Document {
        Document {
            id: key.into(),
            url: url.map(Into::into),
            links: links.iter().map(|s| s.to_string()).collect(),
            ..Document::default()
        }
    }

    #[test]
    fn normalisation_follows_spec() {
        let cases = [
            (
                "HTTP://Example.COM:80/a/./b/../c#frag",
                "http://example.com/a/c",
            ),
            ("https://example.com:443/", "https://example.com/"),
            (
                "https://example.com:8443/x?q=1#y",
                "https://example.com:8443/x?q=1",
            ),
            ("http://example.com", "http://example.com/"),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize_url(input).unwrap().as_str(), expected, "{input}");
        }
        assert!(normalize_url("doc-17").is_none());
        assert!(normalize_url("mailto:someone@example.com").is_none());
    }

    #[test]
    fn resolves_urls_and_ids_and_cleans_links() {
        let docs = [
            doc(
                "a",
                Some("http://x.org/a"),
                &["HTTP://X.ORG:80/b#top", "b", "a", "c", "http://y.org/"],
            ),
            doc(
                "b",
                Some("http://x.org/b"),
                &["http://x.org/./a", "http://z.org/c"],
            ),
            doc("c", Some("http://z.org/c"), &["nowhere"]),
        ];
        let g =
            build_link_graph(docs.iter().map(DocLinks::from), &BuildOptions::default()).unwrap();
        let csr = g.to_csr();
        let edges: Vec<_> = csr.edges().collect();
        assert_eq!(edges, vec![(0, 1), (0, 2), (1, 0), (1, 2)]);
        assert_eq!(g.stats.duplicates, 1);
        assert_eq!(g.stats.self_links, 1);
        assert_eq!(g.stats.unindexed_dropped, 2);
        assert_eq!(g.components(), 1);
    }

    #[test]
    fn same_host_filter_and_unindexed_nodes() {
        let docs = [
            doc(
                "a",
                Some("http://x.org/a"),
                &["http://x.org/b", "http://y.org/p", "ghost"],
            ),
            doc("b", Some("http://x.org/b"), &["http://y.org/p"]),
        ];
        let opts = BuildOptions {
            ignore_same_host: true,
            keep_unindexed: true,
        };
        let g = build_link_graph(docs.iter().map(DocLinks::from), &opts).unwrap();
        assert_eq!(g.stats.same_host, 1);
        assert_eq!(g.nodes.len(), 4);
        assert_eq!(g.nodes[2].key, "http://y.org/p");
        assert!(!g.nodes[2].indexed);
        assert_eq!(g.nodes[3].key, "ghost");
        let edges: Vec<_> = g.to_csr().edges().collect();
        assert_eq!(edges, vec![(0, 2), (0, 3), (1, 2)]);
    }

    #[test]
    fn url_links_fall_back_to_keys() {
        let docs = [
            doc("http://x.org/a", None, &["http://X.org/b"]),
            doc("http://x.org/b", None, &[]),
        ];
        let g =
            build_link_graph(docs.iter().map(DocLinks::from), &BuildOptions::default()).unwrap();
        assert_eq!(g.to_csr().edges().collect::<Vec<_>>(), vec![(0, 1)]);
    }

    #[test]
    fn later_document_replaces_earlier() {
        let docs = [
            doc("a", None, &["b"]),
            doc("b", None, &[]),
            doc("a", None, &[]),
        ];
        let g =
            build_link_graph(docs.iter().map(DocLinks::from), &BuildOptions::default()).unwrap();
        assert_eq!(g.nodes.len(), 2);
        assert_eq!(g.to_csr().m(), 0);
        assert_eq!(g.node_of("b"), Some(1));
    }
}
