//! TLS for the OpenFlow channel (`pssl:` listeners, `ssl:` controllers),
//! as Open vSwitch: a private key, its certificate and a CA certificate
//! (PEM files); both ends must present a certificate signed by the CA.
//! As Open vSwitch, the peer's name is not checked against its
//! certificate: the CA is the trust.
//!
//! A connection is shared by its reader and writer threads: each holds a
//! clone of the TCP socket and the same rustls connection behind a lock.
//! The reader reads the socket (blocking, with the connection's short read
//! timeout) without the lock, then decrypts under it; the writer encrypts
//! under it and writes the records out after. A second lock, taken first,
//! keeps the records in order on the wire when both threads write (the
//! reader answers TLS messages such as key updates).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The PEM files of `--private-key`, `--certificate` and `--ca-cert`
/// (Open vSwitch's options), needed by `ssl:` and `pssl:` targets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The switch's private key (`--private-key`).
    pub private_key: Option<PathBuf>,
    /// Its certificate, signed by the CA the peers trust (`--certificate`).
    pub certificate: Option<PathBuf>,
    /// The CA certificate that signs the peers' certificates (`--ca-cert`).
    pub ca_cert: Option<PathBuf>,
}

/// The loaded TLS settings: one for accepted connections, one for
/// connections to controllers.
pub(crate) struct TlsContext {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

impl TlsFiles {
    /// The client side of these settings (for an `ssl:` OVSDB remote): a
    /// certificate and key to present, the server's certificate checked
    /// against the CA. An error names the option and the file.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        TlsContext::load(self).map(|c| c.client)
    }
}

impl super::ChannelConfig {
    /// Whether a listener or a controller is `pssl:` / `ssl:`.
    fn needs_tls(&self) -> bool {
        self.listen
            .iter()
            .any(|l| matches!(l, super::ListenSpec::Ssl(_)))
            || self
                .controllers
                .iter()
                .any(|c| matches!(c, super::ControllerSpec::Ssl(_)))
    }

    /// With `ssl:` or `pssl:` targets, reads the key, certificate and CA
    /// files: an error says which option is missing or which file is bad.
    pub fn check_tls(&self) -> Result<(), String> {
        self.tls_context().map(|_| ())
    }

    /// The TLS settings, where `ssl:` or `pssl:` targets need them.
    pub(crate) fn tls_context(&self) -> Result<Option<Arc<TlsContext>>, String> {
        if !self.needs_tls() {
            return Ok(None);
        }
        TlsContext::load(&self.tls).map(|c| Some(Arc::new(c)))
    }
}

fn need<'a>(p: &'a Option<PathBuf>, opt: &str) -> Result<&'a Path, String> {
    p.as_deref().ok_or_else(|| {
        format!("ssl: and pssl: need {opt} FILE (all of --private-key, --certificate, --ca-cert)")
    })
}

impl TlsContext {
    /// Reads the three files; an error names the option and the file.
    pub(crate) fn load(f: &TlsFiles) -> Result<TlsContext, String> {
        let key_path = need(&f.private_key, "--private-key")?;
        let cert_path = need(&f.certificate, "--certificate")?;
        let ca_path = need(&f.ca_cert, "--ca-cert")?;
        let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| {
            format!(
                "--private-key {}: no usable PEM private key: {e}",
                key_path.display()
            )
        })?;
        let certs = read_certs(cert_path, "--certificate")?;
        let cas = read_certs(ca_path, "--ca-cert")?;
        let mut roots = RootCertStore::empty();
        for c in cas {
            roots
                .add(c)
                .map_err(|e| format!("--ca-cert {}: {e}", ca_path.display()))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let files = || {
            format!(
                "--private-key {} / --certificate {}",
                key_path.display(),
                cert_path.display()
            )
        };
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| format!("--ca-cert {}: {e}", ca_path.display()))?;
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|e| format!("{}: {e}", files()))?;
        let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| format!("--ca-cert {}: {e}", ca_path.display()))?;
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SignedByCa(server_verifier)))
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("{}: {e}", files()))?;
        Ok(TlsContext {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }
}

fn read_certs(path: &Path, opt: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{opt} {}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{opt} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{opt} {}: no PEM certificate", path.display()));
    }
    Ok(certs)
}

/// A controller's certificate must be signed by the CA; its names are not
/// looked at (as Open vSwitch).
#[derive(Debug)]
struct SignedByCa(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for SignedByCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The chain is checked before the name: a name error means the
        // chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// One TLS connection; clones share the TLS state.
pub(crate) struct TlsConn {
    sock: TcpStream,
    tls: Arc<Mutex<rustls::Connection>>,
    /// Taken (before `tls`) by whoever writes records out: keeps them in
    /// order on the wire.
    wire: Arc<Mutex<()>>,
    /// Bytes read from the socket, not yet given to rustls (this clone's).
    inbuf: Vec<u8>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn tls_err(e: rustls::Error) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, e)
}

impl TlsConn {
    fn new(sock: TcpStream, c: rustls::Connection) -> TlsConn {
        TlsConn {
            sock,
            tls: Arc::new(Mutex::new(c)),
            wire: Arc::new(Mutex::new(())),
            inbuf: Vec::new(),
        }
    }

    /// An accepted connection (the handshake is in [`TlsConn::handshake`]).
    pub(crate) fn server(sock: TcpStream, ctx: &TlsContext) -> io::Result<TlsConn> {
        let c = rustls::ServerConnection::new(ctx.server.clone()).map_err(tls_err)?;
        Ok(TlsConn::new(sock, c.into()))
    }

    /// A connection to the controller at `ip`.
    pub(crate) fn client(sock: TcpStream, ctx: &TlsContext, ip: IpAddr) -> io::Result<TlsConn> {
        let c = rustls::ClientConnection::new(ctx.client.clone(), ServerName::from(ip))
            .map_err(tls_err)?;
        Ok(TlsConn::new(sock, c.into()))
    }

    /// The TCP socket (timeouts, shutdown).
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// The peer's address, for messages.
    pub(crate) fn peer(&self) -> String {
        self.sock
            .peer_addr()
            .map_or_else(|_| "?".into(), |a| a.to_string())
    }

    /// Another handle on the same connection (for the writer thread).
    pub(crate) fn try_clone(&self) -> io::Result<TlsConn> {
        Ok(TlsConn {
            sock: self.sock.try_clone()?,
            tls: self.tls.clone(),
            wire: self.wire.clone(),
            inbuf: Vec::new(),
        })
    }

    /// Runs the handshake to its end, within `limit` and until `stop`
    /// (the socket has a short read timeout): the peer's certificate is
    /// checked here.
    pub(crate) fn handshake(&mut self, limit: Duration, stop: impl Fn() -> bool) -> io::Result<()> {
        let until = Instant::now() + limit;
        loop {
            self.flush_records()?;
            if !lock(&self.tls).is_handshaking() {
                return Ok(());
            }
            if Instant::now() > until || stop() {
                return Err(io::Error::new(
                    ErrorKind::TimedOut,
                    "TLS handshake timed out",
                ));
            }
            if self.inbuf.is_empty() {
                match self.fill() {
                    Ok(0) => {
                        return Err(io::Error::new(
                            ErrorKind::UnexpectedEof,
                            "peer closed the connection during the TLS handshake",
                        ))
                    }
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        continue
                    }
                    Err(e) => return Err(e),
                }
            }
            self.feed()?;
        }
    }

    /// Writes out the records rustls has ready.
    fn flush_records(&self) -> io::Result<()> {
        if !lock(&self.tls).wants_write() {
            return Ok(());
        }
        let _w = lock(&self.wire);
        let mut out = Vec::new();
        {
            let mut t = lock(&self.tls);
            while t.wants_write() {
                t.write_tls(&mut out)?;
            }
        }
        if out.is_empty() {
            return Ok(());
        }
        (&self.sock).write_all(&out)
    }

    /// Reads the socket (without the lock); 0 at its end.
    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = (&self.sock).read(&mut chunk)?;
        self.inbuf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Gives rustls the bytes read; answers what needs an answer.
    fn feed(&mut self) -> io::Result<()> {
        let (used, res) = {
            let mut t = lock(&self.tls);
            let mut s = &self.inbuf[..];
            let used = t.read_tls(&mut s)?;
            (used, t.process_new_packets())
        };
        self.inbuf.drain(..used);
        if used == 0 && !self.inbuf.is_empty() {
            // rustls took nothing: never spin on it.
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                "TLS input not taken",
            ));
        }
        match res {
            Ok(_) => self.flush_records(),
            Err(e) => {
                // The alert for the peer, then the error.
                let _ = self.flush_records();
                Err(tls_err(e))
            }
        }
    }

    /// Closes the socket both ways (the other clone's reads end).
    pub(crate) fn shutdown(&self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

impl Read for TlsConn {
    /// Decrypted bytes; `WouldBlock`/`TimedOut` when the socket had none
    /// within its read timeout; 0 at the end.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match lock(&self.tls).reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.inbuf.is_empty() && self.fill()? == 0 {
                return Ok(0);
            }
            self.feed()?;
        }
    }
}

impl Write for TlsConn {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let _w = lock(&self.wire);
        let mut out = Vec::with_capacity(b.len() + 64);
        let n = {
            let mut t = lock(&self.tls);
            let n = t.writer().write(b)?;
            while t.wants_write() {
                t.write_tls(&mut out)?;
            }
            n
        };
        (&self.sock).write_all(&out)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
