//! WebGraph BVGraph input (`webgraph` crate): the compressed format of the LAW web graphs and
//! of Common Crawl's host and domain graphs. A graph is read sequentially from
//! `BASE.properties` and `BASE.graph` (no `.ef` offsets needed), arc by arc.
//!
//! webgraph's decoders panic on a truncated or corrupt `.graph` rather than return an error,
//! so reading runs under `catch_unwind` (with the panic message kept off the terminal) and is
//! checked against the properties: every arc must name a node below `nodes`, and the arc count
//! must be the promised one. Either failure is an error naming the file.

use std::cell::Cell;
use std::path::Path;
use std::sync::OnceLock;

use dsi_bitstream::prelude::BE;
use lender::prelude::*;
use webgraph::graphs::bvgraph::BvGraphSeq;
use webgraph::graphs::vec_graph::VecGraph;
use webgraph::prelude::*;

use super::{GraphError, Result};

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, turning a panic into `Err(message)` without printing it.
fn quietly<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    result.map_err(|payload| crate::panics::panic_message(payload.as_ref()))
}

fn format_error(base: &Path, ext: &str, message: String) -> GraphError {
    GraphError::Format {
        path: format!("{}.{ext}", base.display()),
        message,
    }
}

/// Calls `emit(source, target)` for every arc of the BVGraph `base`; returns its node count.
pub(crate) fn for_each_arc(base: &Path, mut emit: impl FnMut(u32, u32)) -> Result<usize> {
    let graph = BvGraphSeq::with_basename(base).load().map_err(|e| {
        format_error(
            base,
            "properties",
            format!("cannot load the BVGraph: {e:#}"),
        )
    })?;
    let n = graph.num_nodes();
    if n > u32::MAX as usize {
        return Err(GraphError::TooLarge {
            what: "a graph",
            n,
            limit: u32::MAX as usize,
        });
    }
    let promised = graph.get_num_arcs();
    let read = quietly(|| {
        let mut count = 0u64;
        let mut outside = None;
        for_![(src, succ) in graph.iter() {
            for dst in succ {
                if dst >= n && outside.is_none() {
                    outside = Some((src, dst));
                }
                if outside.is_none() {
                    emit(src as u32, dst as u32);
                }
                count += 1;
            }
        }];
        (count, outside)
    });
    match read {
        Err(panic) => Err(format_error(
            base,
            "graph",
            format!("the file is corrupt or truncated (decoder: {panic})"),
        )),
        Ok((_, Some((src, dst)))) => Err(format_error(
            base,
            "graph",
            format!("arc {src} → {dst} names a node outside 0..{n}: the file is corrupt"),
        )),
        Ok((count, None)) if promised.is_some_and(|m| m != count) => Err(format_error(
            base,
            "graph",
            format!(
                "the properties promise {} arcs, the file has {count}: it is corrupt or truncated",
                promised.unwrap_or(0)
            ),
        )),
        Ok(_) => Ok(n),
    }
}

/// Writes a graph on `n` nodes as the BVGraph `base` (`.graph`, `.offsets`, `.properties`);
/// duplicate arcs are stored once.
pub fn write(base: &Path, n: usize, arcs: impl IntoIterator<Item = (u32, u32)>) -> Result<()> {
    let mut g = VecGraph::from_arcs(arcs.into_iter().map(|(u, v)| (u as usize, v as usize)));
    if n > 0 {
        g.add_node(n - 1);
    }
    BvComp::with_basename(base)
        .comp_graph::<BE>(&g)
        .map_err(|e| format_error(base, "graph", format!("cannot write the BVGraph: {e:#}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corrupt_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("g");
        let arcs = vec![(0u32, 1u32), (0, 2), (1, 2), (2, 0), (3, 0), (4, 3), (0, 1)];
        write(&base, 6, arcs.clone()).unwrap();
        let mut got = Vec::new();
        let n = for_each_arc(&base, |u, v| got.push((u, v))).unwrap();
        assert_eq!(n, 6);
        let mut want = arcs;
        want.sort_unstable();
        want.dedup();
        assert_eq!(got, want);

        let graph_file = base.with_extension("graph");
        let bytes = std::fs::read(&graph_file).unwrap();
        std::fs::write(&graph_file, &bytes[..bytes.len() / 2]).unwrap();
        let err = for_each_arc(&base, |_, _| {}).unwrap_err().to_string();
        assert!(err.contains("g.graph") && err.contains("corrupt"), "{err}");

        let props = base.with_extension("properties");
        std::fs::write(&props, "garbage\n").unwrap();
        let err = for_each_arc(&base, |_, _| {}).unwrap_err().to_string();
        assert!(err.contains("g.properties"), "{err}");
        assert!(for_each_arc(&dir.path().join("missing"), |_, _| {}).is_err());
    }
}
