//! `rankd store verify`: reads back every blob of every shard's newest generation in an
//! object store and compares it with its manifest (`crate::cluster::generation::verify`),
//! so an operator learns of a lost or damaged blob before a new replica does.
//! `rankd store repair --from DIR...` uploads such blobs again from copies in replicas' or
//! writers' directories (`crate::cluster::generation::repair`); `rankd publish --verify`
//! does the same from the writer's index while publishing.

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
    /// Check as `verify` does, and upload each lost or damaged blob again from a copy in the
    /// `--from` directories (default: `--data-dir`) (any shard's replicas or writer: a copy is used only when its
    /// SHA-256 is the manifest's); exit 1 naming what no directory held.
    Repair(RepairArgs),
}

#[derive(clap::Args, Debug)]
pub struct RepairArgs {
    /// The object store: `s3://BUCKET[/PREFIX]`, `file:///PATH` or a directory.
    #[arg(long, env = "RANKD_STORE")]
    pub store: String,
    /// A directory to take copies from (a replica's or writer's data directory, or a
    /// collection's); repeat for more. Default: `--data-dir`.
    #[arg(long = "from")]
    pub from: Vec<std::path::PathBuf>,
    /// The data directory copies are taken from when no `--from` is given (this host's
    /// replica, writer or collection).
    #[arg(long, env = "RANKD_DATA_DIR", default_value = "./data")]
    pub data_dir: std::path::PathBuf,
    /// Print a JSON report instead of text (and no progress bar).
    #[arg(long)]
    pub json: bool,
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
        StoreCommand::Repair(a) => repair(a),
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
            "{damaged} blobs of {} are lost or damaged; `rankd store repair --store {} --from \
             DIR` uploads them again from a replica's copies, `rankd publish --verify` from the \
             writer's index",
            args.store,
            args.store
        );
    }
    Ok(())
}

fn repair(mut args: RepairArgs) -> anyhow::Result<()> {
    let flag = if args.from.is_empty() {
        args.from.push(args.data_dir.clone());
        "--data-dir"
    } else {
        "--from"
    };
    for dir in &args.from {
        if !dir.is_dir() {
            return Err(crate::error::Invalid(format!(
                "{flag} {}: not a directory",
                dir.display()
            ))
            .into());
        }
    }
    let store = Store::open(&args.store)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bar = super::progress(0, "repairing", args.json);
    let found = runtime.block_on(generation::repair(&store, &args.from, &|| bar.inc(1)))?;
    bar.finish_and_clear();
    let repaired: usize = found.iter().map(|r| r.repaired.len()).sum();
    let unrepaired: usize = found.iter().map(|r| r.unrepaired.len()).sum();
    if args.json {
        println!(
            "{}",
            serde_json::json!({"store": args.store, "shards": found, "repaired": repaired,
                               "unrepaired": unrepaired})
        );
    } else {
        for r in &found {
            println!(
                "shard {}: generation {}, {} files: {}",
                r.shard,
                r.generation,
                r.files,
                match (r.repaired.len(), r.unrepaired.len()) {
                    (0, 0) => "whole".to_string(),
                    (n, 0) => format!("{n} repaired"),
                    (n, m) => format!("{n} repaired, {m} still lost or damaged"),
                }
            );
            for line in r.repaired.iter().chain(&r.unrepaired) {
                println!("  {line}");
            }
        }
    }
    if unrepaired > 0 {
        anyhow::bail!(
            "{unrepaired} blobs of {} are still lost or damaged: no --from directory holds a \
             copy with the manifest's SHA-256 (`rankd publish --verify` from the writer's index \
             publishes a whole generation)",
            args.store
        );
    }
    Ok(())
}
