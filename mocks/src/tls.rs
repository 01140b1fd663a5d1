//! `--tls`: HTTPS like the real service. At start the emulator makes its own CA and a
//! server certificate signed by it (for `localhost`, `127.0.0.1`, `::1` and the listen
//! address), writes the CA to `<state dir>/tls/ca.pem` (named in the ready line as
//! `ca_file`) and serves every route, the HTTP/1.1 upgrades included, over TLS.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The server side of `--tls`.
pub struct Tls {
    pub acceptor: tokio_rustls::TlsAcceptor,
    pub ca_file: PathBuf,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("ca_file", &self.ca_file)
            .finish_non_exhaustive()
    }
}

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("TLS setup: {e}")
}

/// Generates the CA and server certificate, writes the CA into `state_dir`.
pub fn setup(state_dir: &Path, listen: IpAddr) -> anyhow::Result<Tls> {
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.distinguished_name
        .push(DnType::CommonName, "createos-mock local CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;

    let key = KeyPair::generate().map_err(err)?;
    let mut server = CertificateParams::new(vec!["localhost".to_string()]).map_err(err)?;
    server
        .distinguished_name
        .push(DnType::CommonName, "createos-mock");
    let mut ips: Vec<IpAddr> = vec![
        IpAddr::from([127, 0, 0, 1]),
        IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
    ];
    if !listen.is_unspecified() && !ips.contains(&listen) {
        ips.push(listen);
    }
    server
        .subject_alt_names
        .extend(ips.into_iter().map(SanType::IpAddress));
    let server_cert = server.signed_by(&key, &ca_cert, &ca_key).map_err(err)?;

    let dir = state_dir.join("tls");
    std::fs::create_dir_all(&dir)?;
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca_cert.pem())?;

    let chain = vec![
        CertificateDer::from(server_cert.der().to_vec()),
        CertificateDer::from(ca_cert.der().to_vec()),
    ];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(err)?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(err)?;
    // HTTP/1.1 only: the upgrade routes (/shell, /tunnel) need it, and so do the clients'.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        ca_file,
    })
}
