//! `rankd publish`: uploads the index in the data directory — every shard of a collection
//! split by `rankd ingest --shards N`, or a single index as shard 0 of 1 — to an object store
//! as each shard's next generation, for replicas started with `serve --role leaf --store` to
//! fetch (`crate::cluster::generation`). Only files the store lacks are uploaded. With
//! `--metastore`, each new generation is recorded there too (compare-and-set).

use std::path::PathBuf;

use std::time::Duration;

use crate::cluster::generation::{self, Published, Store};
use crate::cluster::metastore::{Metastore, Publish};

/// Makes `p`'s generation its shard's current one in the metastore, whose record for the
/// shard was `current` when publishing began. The store's manifest is the commit
/// (`crate::cluster::generation`); the metastore's compare-and-set keeps its record
/// monotonic, so a slower publisher cannot move it back.
async fn record(
    m: &Metastore,
    collection: &str,
    current: Option<u64>,
    p: &Published,
) -> anyhow::Result<()> {
    if current.is_some_and(|g| g >= p.generation) {
        return Ok(());
    }
    match m
        .publish_generation(collection, p.shard, current, p.generation, &p.manifest)
        .await?
    {
        Publish::Won => Ok(()),
        Publish::Lost { current } => anyhow::bail!(
            "generation {} of shard {} is in the store, but the metastore moved to {current:?} \
             meanwhile (another publisher); publish again",
            p.generation,
            p.shard
        ),
    }
}

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// Where the index is written (a collection's directory for a sharded one).
    #[arg(long, env = "RANKD_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// The object store: `s3://BUCKET[/PREFIX]` (credentials and endpoint from the `AWS_*`
    /// variables), `file:///PATH` or a directory.
    #[arg(long, env = "RANKD_STORE")]
    pub store: String,
    /// Record each shard's new generation in the cluster metastore (`postgres://..` or
    /// `sqlite:PATH`) by compare-and-set, for `--collection`: roots and operators read the
    /// current generation of every shard there.
    #[arg(long, value_name = "URL")]
    pub metastore: Option<String>,
    /// With `--metastore`: the collection's name.
    #[arg(long, default_value = "main")]
    pub collection: String,
    /// Read back every blob of the newest generation this index reuses and compare its
    /// SHA-256 (without it, only their sizes are checked); a lost or damaged one is uploaded
    /// again from this index. Repairs a store whose blob was damaged after it was written.
    #[arg(long)]
    pub verify: bool,
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
    // The metastore and each shard's current generation in it, read once.
    let metastore = match &args.metastore {
        Some(url) => Some(runtime.block_on(async {
            let m = Metastore::connect(url, Duration::from_secs(10)).await?;
            m.create_collection(&args.collection, shards).await?;
            let map = m.read_map().await?;
            let current: Vec<Option<u64>> = (0..shards as usize)
                .map(|s| {
                    map.collection(&args.collection)
                        .and_then(|c| c.shards.get(s))
                        .and_then(|s| s.current_generation)
                })
                .collect();
            anyhow::Ok((m, current))
        })?),
        None => None,
    };
    let mut published = Vec::new();
    for (shard, dir) in dirs.iter().enumerate() {
        let check = match args.verify {
            true => generation::Check::Contents,
            false => generation::Check::Sizes,
        };
        let p = runtime.block_on(generation::publish_checked(
            &store,
            dir,
            shard as u32,
            shards,
            check,
        ))?;
        if let Some((m, current)) = &metastore {
            runtime.block_on(record(m, &args.collection, current[shard], &p))?;
        }
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
        for r in &p.repaired {
            println!("shard {}: repaired the store's blob of {r}", p.shard);
        }
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
