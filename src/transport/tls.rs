//! The one place TLS trust is decided: the webpki roots plus the extra CA certificates the
//! user names (`ClientBuilder::ca_file`, `--ca-file`, `CREATEOS_CA_FILE`, `SSL_CERT_FILE`:
//! a corporate TLS proxy, or the CA `createos-mock --tls` writes). reqwest (REST calls) and
//! the hand-made HTTP/1.1 upgrades (shell, tunnel) use configs built here, so both trust
//! exactly the same roots.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use crate::error::{Error, Result};

pub use crate::config::CA_FILE_ENV_VARS;

/// How to add a CA, for error messages.
pub const ADD_CA_HINT: &str =
    "if the server's certificate comes from a private CA (a corporate TLS proxy, or `createos-mock --tls`), \
     trust it with --ca-file FILE, CREATEOS_CA_FILE=FILE or SSL_CERT_FILE=FILE (PEM)";

/// The CA files to trust beyond the webpki roots: the given ones, then the environment's.
pub fn ca_files(given: &[PathBuf], env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut files = given.to_vec();
    for name in CA_FILE_ENV_VARS {
        if let Some(value) = env(name).filter(|v| !v.trim().is_empty()) {
            let path = PathBuf::from(value.trim());
            if !files.contains(&path) {
                files.push(path);
            }
        }
    }
    files
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bad = |why: String| Error::invalid("ca_file", format!("{}: {why}", path.display()));
    let pem = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(bad("holds no PEM certificate".into()));
    }
    Ok(certs)
}

/// The trusted roots: webpki's and every certificate of `files`.
pub fn root_store(files: &[PathBuf]) -> Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for file in files {
        for cert in read_certificates(file)? {
            roots.add(cert).map_err(|e| {
                Error::invalid(
                    "ca_file",
                    format!("{}: not a usable CA certificate: {e}", file.display()),
                )
            })?;
        }
    }
    Ok(roots)
}

/// A rustls client config (ring provider) over `roots`, offering `alpn`.
pub fn client_config(roots: rustls::RootCertStore, alpn: &[&[u8]]) -> Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Connection {
            endpoint: "TLS setup".into(),
            source: Box::new(e),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// The configs of one client: (REST over reqwest: h2 + http/1.1, upgrades: http/1.1 only).
pub fn configs(files: &[PathBuf]) -> Result<(rustls::ClientConfig, Arc<rustls::ClientConfig>)> {
    let roots = root_store(files)?;
    let rest = client_config(roots.clone(), &[b"h2", b"http/1.1"])?;
    let upgrade = Arc::new(client_config(roots, &[b"http/1.1"])?);
    Ok((rest, upgrade))
}

/// The certificate problem in `err`'s source chain, if the failure is one.
pub fn certificate_problem(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(rustls::Error::InvalidCertificate(problem)) = e.downcast_ref::<rustls::Error>()
        {
            return Some(format!("{problem:?}"));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if let Some(problem) = certificate_problem(inner) {
                    return Some(problem);
                }
            }
        }
        next = e.source();
    }
    None
}

/// A server certificate the client does not trust (never retried: it will not change).
#[derive(Debug)]
pub struct UntrustedCertificate {
    problem: String,
}

impl std::fmt::Display for UntrustedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server's TLS certificate is not trusted (invalid certificate: {}); {ADD_CA_HINT}",
            self.problem
        )
    }
}

impl std::error::Error for UntrustedCertificate {}

/// The error to report for a failed connection: a certificate problem is named, with how
/// to trust a private CA.
pub fn explain(
    err: Box<dyn std::error::Error + Send + Sync>,
) -> Box<dyn std::error::Error + Send + Sync> {
    match certificate_problem(err.as_ref()) {
        Some(problem) => Box::new(UntrustedCertificate { problem }),
        None => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_files_come_from_options_then_environment() {
        let env = |n: &str| match n {
            "CREATEOS_CA_FILE" => Some("/a.pem".to_string()),
            "SSL_CERT_FILE" => Some("/b.pem".to_string()),
            _ => None,
        };
        let files = ca_files(
            &[PathBuf::from("/given.pem"), PathBuf::from("/a.pem")],
            &env,
        );
        assert_eq!(
            files,
            vec![
                PathBuf::from("/given.pem"),
                PathBuf::from("/a.pem"),
                PathBuf::from("/b.pem")
            ]
        );
        assert!(ca_files(&[], &|_| None).is_empty());
    }

    #[test]
    fn unreadable_or_empty_ca_files_are_refused() {
        let err = root_store(&[PathBuf::from("/nonexistent/ca.pem")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/ca.pem") && err.contains("cannot read"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let err = root_store(&[empty]).unwrap_err().to_string();
        assert!(err.contains("no PEM certificate"), "{err}");
    }
}
