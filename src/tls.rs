//! TLS for rankd's HTTP: a server's certificate and key (`rankd serve --tls-cert --tls-key`,
//! every role: clients, a root's calls to its leaves and the admin token all travel
//! encrypted), and the certificates a root trusts for its leaves' `https://` URLs
//! (`--tls-ca`, else the system's). rustls with the aws-lc-rs provider, which the object
//! store's S3 client already builds; PEM files as every certificate tool writes them.
//! Loading fails naming the file and what is wrong with it, before the server listens.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn certificates(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read the certificates in {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{} holds a malformed PEM certificate", path.display()))?;
    if certs.is_empty() {
        bail!("{} holds no PEM certificate", path.display());
    }
    Ok(certs)
}

/// The server side: `cert` (PEM, the server's certificate first, then its chain) and `key`
/// (PEM, PKCS#8, PKCS#1 or SEC1), offering HTTP/1.1.
pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = certificates(cert)?;
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("cannot read a PEM private key from {}", key.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .with_context(|| {
            format!(
                "the key does not fit the certificate in {} (or is not a key rustls takes)",
                cert.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The client side of a root's calls to its leaves: the certificates of `ca` (PEM) as the
/// only roots trusted, or the system's when `None`.
pub fn client_config(ca: Option<&Path>) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            for cert in certificates(path)? {
                roots.add(cert).with_context(|| {
                    format!("{} holds an unusable CA certificate", path.display())
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A system certificate rustls cannot parse is skipped, as browsers do.
                let _ = roots.add(cert);
            }
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// [`client_config`] trusting the system's roots (which cannot fail: a system without any
/// trusts none, and its `https://` calls fail naming the certificate).
pub fn system_roots() -> Arc<rustls::ClientConfig> {
    client_config(None).expect("the aws-lc-rs provider supports the default protocol versions")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/tls")
            .join(name)
    }

    #[test]
    fn the_fixtures_load_and_bad_files_are_named() {
        server_config(&fixture("leaf.pem"), &fixture("leaf.key")).unwrap();
        client_config(Some(&fixture("ca.pem"))).unwrap();
        // A key that is not the certificate's.
        let e = server_config(&fixture("leaf.pem"), &fixture("ca.key")).unwrap_err();
        assert!(format!("{e:#}").contains("does not fit"), "{e:#}");
        // No certificate at all, a missing file.
        let e = server_config(&fixture("leaf.key"), &fixture("leaf.key")).unwrap_err();
        assert!(format!("{e:#}").contains("leaf.key"), "{e:#}");
        let e = client_config(Some(&fixture("missing.pem"))).unwrap_err();
        assert!(format!("{e:#}").contains("missing.pem"), "{e:#}");
    }
}
