//! Where index generations are published ([`super::generation`]): an object store from the
//! `object_store` crate, named by a URL.
//!
//! - `s3://BUCKET[/PREFIX]`: Amazon S3 or any S3-compatible server. Credentials, region and
//!   endpoint come only from the standard `AWS_*` variables (`AmazonS3Builder::from_env`:
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
//!   `AWS_ALLOW_HTTP` for a plain-HTTP test server such as moto), never from flags, so they
//!   do not show in process lists.
//! - `file:///ABSOLUTE/PATH` or a plain path: a directory on a shared filesystem (or one
//!   machine's disk, for tests and single-host clusters). `LocalFileSystem` writes each object
//!   to a temporary file and renames it, so a reader never sees half an object.
//!
//! Both give atomic whole-object writes and a create-if-absent put (`PutMode::Create`), which
//! is all publishing needs: no lock, no consensus.

use std::sync::Arc;

use anyhow::Context;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;

use crate::error::Invalid;

/// An object store and the prefix under which a collection's generations live.
#[derive(Clone)]
pub struct Store {
    pub inner: Arc<dyn ObjectStore>,
    /// Every key this collection writes starts with it (may be empty).
    pub prefix: ObjectPath,
    /// The URL it was opened from, for messages.
    pub url: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("url", &self.url).finish()
    }
}

impl Store {
    /// Opens the store `url` names (see the module documentation for the forms).
    pub fn open(url: &str) -> anyhow::Result<Store> {
        let (inner, prefix): (Arc<dyn ObjectStore>, String) = if let Some(rest) =
            url.strip_prefix("s3://")
        {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(Invalid(format!("store URL {url:?} names no bucket")).into());
            }
            let s3 = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .build()
                .with_context(|| format!("cannot use the S3 store {url}"))?;
            (Arc::new(s3), prefix.trim_matches('/').to_string())
        } else if url.contains("://") && !url.starts_with("file://") {
            return Err(Invalid(format!(
                    "store URL {url:?}: only s3://BUCKET[/PREFIX], file:///PATH or a path are supported"
                ))
                .into());
        } else {
            let path = std::path::PathBuf::from(url.strip_prefix("file://").unwrap_or(url));
            std::fs::create_dir_all(&path)
                .with_context(|| format!("cannot create the store directory {}", path.display()))?;
            // Synced before each put returns: a primary acknowledges a write once its
            // generation is in the store, so the store must hold it across a crash.
            let fs = object_store::local::LocalFileSystem::new_with_prefix(&path)
                .with_context(|| format!("cannot use {} as a store", path.display()))?
                .with_fsync(true);
            (Arc::new(fs), String::new())
        };
        Ok(Store {
            inner,
            prefix: ObjectPath::from(prefix),
            url: url.to_string(),
        })
    }

    /// The key `parts` name under the prefix.
    pub fn key(&self, parts: &[&str]) -> ObjectPath {
        let mut key = self.prefix.clone();
        for part in parts {
            key = key.join(*part);
        }
        key
    }
}
