//! `rankd serve`: open the index and serve the HTTP API.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::DataArgs;
use crate::api::{self, AppState};
use crate::text::TextIndex;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    #[arg(long, env = "RANKD_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    #[command(flatten)]
    pub data: DataArgs,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let index = TextIndex::open(&args.data.data_dir, args.data.config()?)?;
    serve_index(index, args.addr)
}

/// Serves `index` on `addr` until SIGTERM or Ctrl-C.
pub fn serve_index(index: TextIndex, addr: SocketAddr) -> anyhow::Result<()> {
    let docs = index.num_docs();
    let links = match crate::links::load(&index) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("warning: serving without link scores: {e:#}");
            None
        }
    };
    if links.is_none() {
        eprintln!("note: no link scores loaded; `rankd graph` computes them");
    }
    let state = Arc::new(AppState {
        index,
        links,
        ready: AtomicBool::new(false),
    });
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(api::serve(state, addr, |bound| {
        eprintln!("rankd is serving {docs} documents on http://{bound}/ (try /search?q=iterator)");
    }))
}
