//! `rankd publish`: uploads the index in the data directory — every shard of a collection
//! split by `rankd ingest --shards N`, or a single index as shard 0 of 1 — to an object store
//! as each shard's next generation, for replicas started with `serve --role leaf --store` to
//! fetch (`crate::cluster::generation`). Only files the store lacks are uploaded.

use std::path::PathBuf;

use crate::cluster::generation::{self, Store};

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// Where the index is written (a collection's directory for a sharded one).
    #[arg(long, env = "RANKD_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// The object store: `s3://BUCKET[/PREFIX]` (credentials and endpoint from the `AWS_*`
    /// variables), `file:///PATH` or a directory.
    #[arg(long, env = "RANKD_STORE")]
    pub store: String,
    /// Print a JSON summary instead of text (and no progress bar).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: PublishArgs) -> anyhow::Result<()> {
    let store = Store::open(&args.store)?;
    let dirs = match crate::cluster::existing_shard_dirs(&args.data_dir)? {
        Some(dirs) => dirs,
        None => vec![args.data_dir.clone()],
    };
    let shards = dirs.len() as u32;
    let bar = super::progress(shards.into(), "publishing", args.json);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut published = Vec::new();
    for (shard, dir) in dirs.iter().enumerate() {
        let p = runtime.block_on(generation::publish(&store, dir, shard as u32, shards))?;
        bar.inc(1);
        published.push(p);
    }
    bar.finish_and_clear();
    if args.json {
        println!(
            "{}",
            serde_json::json!({"store": args.store, "shards": published})
        );
        return Ok(());
    }
    for p in &published {
        if p.unchanged {
            println!(
                "shard {}: unchanged since generation {} ({} files, {} bytes)",
                p.shard, p.generation, p.files, p.bytes
            );
        } else {
            println!(
                "shard {}: generation {} published: uploaded {} of {} files, {} of {} bytes, \
                 in {:.2} s",
                p.shard,
                p.generation,
                p.files_uploaded,
                p.files,
                p.bytes_uploaded,
                p.bytes,
                p.seconds
            );
        }
    }
    Ok(())
}
