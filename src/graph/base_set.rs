//! The query-dependent neighbourhood of HITS and SALSA (SPEC §2.2, Kleinberg 1999): the root set
//! (top documents of the text model), every page a root page links to, and up to `d` pages
//! linking to each root page — `d` caps the in-links so one popular root page cannot swamp the
//! base set.

use std::collections::HashSet;

use super::{check_nodes, Csr, Result};

/// SPEC §2.2 defaults: root set t = 200, in-link cap d = 50.
pub const DEFAULT_ROOT_SIZE: usize = 200;
pub const DEFAULT_IN_LINK_CAP: usize = 50;

/// The base set of `root`, root pages first (in the given order), then the pages they link to,
/// then the in-linking pages (the first `in_cap` of each root page's in-links, by node id —
/// deterministic, as the cap is about size, not choice). Duplicates appear once.
pub(crate) fn base_set(g: &Csr, root: &[u32], in_cap: usize) -> Result<Vec<u32>> {
    check_nodes(root, g.n())?;
    let mut seen = HashSet::new();
    let mut nodes = Vec::new();
    let mut add = |u: u32| {
        if seen.insert(u) {
            nodes.push(u);
        }
    };
    root.iter().for_each(|&u| add(u));
    for &u in root {
        g.out(u).iter().for_each(|&v| add(v));
    }
    for &u in root {
        g.inn(u).iter().take(in_cap).for_each(|&v| add(v));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_out_links_and_capped_in_links() {
        // 0 → 1, 2..=5 → 0, 1 → 6
        let edges = [(0, 1), (2, 0), (3, 0), (4, 0), (5, 0), (1, 6)];
        let (g, _) = Csr::from_edges(7, &edges).unwrap();
        assert_eq!(base_set(&g, &[0], 2).unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(
            base_set(&g, &[0, 1], 50).unwrap(),
            vec![0, 1, 6, 2, 3, 4, 5]
        );
        assert!(base_set(&g, &[9], 2).is_err());
    }
}
