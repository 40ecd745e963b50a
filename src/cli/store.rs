//! `rankd store verify`: reads back every blob of every shard's newest generation in an
//! object store and compares it with its manifest (`crate::cluster::generation::verify`),
//! so an operator learns of a lost or damaged blob before a new replica does. The repair is
//! `rankd publish --verify` from the writer's index, which uploads such blobs again.

use crate::cluster::generation::{self, Store};

#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub command: StoreCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum StoreCommand {
    /// Read back every blob of each shard's newest generation and check its size and
    /// SHA-256; exit 1 naming every lost or damaged one.
    Verify(VerifyArgs),
}

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// The object store: `s3://BUCKET[/PREFIX]`, `file:///PATH` or a directory.
    #[arg(long, env = "RANKD_STORE")]
    pub store: String,
    /// Print a JSON report instead of text (and no progress bar).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: StoreArgs) -> anyhow::Result<()> {
    match args.command {
        StoreCommand::Verify(a) => verify(a),
    }
}

fn verify(args: VerifyArgs) -> anyhow::Result<()> {
    let store = Store::open(&args.store)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bar = super::progress(0, "verifying", args.json);
    let found = runtime.block_on(generation::verify(&store, &|| bar.inc(1)))?;
    bar.finish_and_clear();
    let damaged: usize = found.iter().map(|v| v.damaged.len()).sum();
    if args.json {
        println!(
            "{}",
            serde_json::json!({"store": args.store, "shards": found, "damaged": damaged})
        );
    } else {
        for v in &found {
            println!(
                "shard {}: generation {}, {} files, {} bytes: {}",
                v.shard,
                v.generation,
                v.files,
                v.bytes,
                if v.damaged.is_empty() {
                    "whole".to_string()
                } else {
                    format!("{} lost or damaged", v.damaged.len())
                }
            );
            for d in &v.damaged {
                println!("  {d}");
            }
        }
    }
    if damaged > 0 {
        anyhow::bail!(
            "{damaged} blobs of {} are lost or damaged; `rankd publish --verify --store {}` \
             from the writer's index uploads them again",
            args.store,
            args.store
        );
    }
    Ok(())
}
