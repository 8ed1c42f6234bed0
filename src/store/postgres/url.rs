//! A PostgreSQL server's address as people give it (`postgres://…`), and
//! how we connect to it: TLS through rustls, the password never shown.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, bail};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How long one connection attempt may take before we call the server
/// unreachable (a black-holed address would otherwise hang the turn).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a `--db` value names a server rather than a file.
pub(crate) fn is_server(value: &str) -> bool {
    value.starts_with("postgres://") || value.starts_with("postgresql://")
}

/// A server URL in libpq's syntax. Holds the password; `Display` and
/// `Debug` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrl {
    raw: String,
}

impl ServerUrl {
    /// Check the URL now, so a typo is a usage error before anything runs.
    pub fn parse(raw: &str) -> anyhow::Result<ServerUrl> {
        let url = ServerUrl { raw: raw.into() };
        url.config().map(|_| url)
    }

    /// The URL as given, password included: only for a child process's
    /// environment, never for output.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The driver's configuration and our TLS settings, with libpq's
    /// meaning of `sslmode` (the driver knows only disable, prefer and
    /// require, and would verify nothing itself):
    ///
    /// | sslmode | TLS | certificate checked |
    /// |---|---|---|
    /// | `disable` | never | - |
    /// | `allow`, `prefer` (default) | when the server offers it | no |
    /// | `require` | always | no; against `sslrootcert` when given (as libpq) |
    /// | `verify-ca` | always | chain, against `sslrootcert` or the system's roots |
    /// | `verify-full` | always | chain and host name |
    pub fn config(&self) -> anyhow::Result<(tokio_postgres::Config, Tls)> {
        let (base, query) = match self.raw.split_once('?') {
            Some((b, q)) => (b, q),
            None => (self.raw.as_str(), ""),
        };
        let mut kept = Vec::new();
        let mut root_cert = None;
        let mut mode = "prefer";
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => mode = value,
                "sslrootcert" => root_cert = Some(PathBuf::from(value)),
                _ => kept.push(pair.to_string()),
            }
        }
        let (driver_mode, check) = match mode {
            "disable" => ("disable", Check::Nothing),
            "allow" | "prefer" => ("prefer", Check::Nothing),
            "require" if root_cert.is_some() => ("require", Check::Chain),
            "require" => ("require", Check::Nothing),
            "verify-ca" => ("require", Check::Chain),
            "verify-full" => ("require", Check::Full),
            other => bail!(
                "{self}: sslmode={other} is not one of disable, allow, prefer, require, verify-ca, verify-full"
            ),
        };
        kept.push(format!("sslmode={driver_mode}"));
        let cleaned = format!("{base}?{}", kept.join("&"));
        let mut config: tokio_postgres::Config = cleaned
            .parse()
            .with_context(|| format!("{self} is not a PostgreSQL URL libpq would accept"))?;
        if config.get_hosts().is_empty() {
            bail!("{self} names no host");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("duduclaw-session");
        }
        Ok((config, Tls { root_cert, check }))
    }
}

/// What of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Encrypt only (libpq's prefer and require): a self-signed
    /// certificate is accepted, the handshake's signatures still checked.
    Nothing,
    /// The chain up to a trusted root, whatever name it is for.
    Chain,
    /// The chain and the host name.
    Full,
}

/// The TLS side of a server URL.
pub struct Tls {
    root_cert: Option<PathBuf>,
    check: Check,
}

impl Tls {
    /// A connector for the driver (used when TLS is negotiated).
    pub fn connector(&self) -> anyhow::Result<MakeRustlsConnect> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let trust: Option<Arc<dyn ServerCertVerifier>> = match (self.check, &self.root_cert) {
            (Check::Nothing, _) => None,
            (_, Some(path)) => {
                let mut roots = rustls::RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .with_context(|| format!("could not read sslrootcert {}", path.display()))?;
                for cert in certs {
                    roots
                        .add(cert)
                        .with_context(|| format!("a bad certificate in {}", path.display()))?;
                }
                let verifier = WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    Arc::clone(&provider),
                )
                .build()
                .with_context(|| format!("no usable root in {}", path.display()))?;
                Some(verifier)
            }
            (_, None) => {
                // The system's roots are loaded once per process.
                static SYSTEM: OnceLock<Arc<dyn ServerCertVerifier>> = OnceLock::new();
                match SYSTEM.get() {
                    Some(v) => Some(Arc::clone(v)),
                    None => {
                        let v: Arc<dyn ServerCertVerifier> = Arc::new(
                            rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
                                .context("could not load the system's TLS roots")?,
                        );
                        Some(Arc::clone(SYSTEM.get_or_init(|| v)))
                    }
                }
            }
        };
        let verifier = Verifier {
            trust,
            check: self.check,
            provider: Arc::clone(&provider),
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("no TLS version in common with the crypto provider")?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }
}

/// Checks the server's certificate as far as `sslmode` asks.
#[derive(Debug)]
struct Verifier {
    trust: Option<Arc<dyn ServerCertVerifier>>,
    check: Check,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(trust) = &self.trust else {
            return Ok(ServerCertVerified::assertion());
        };
        let verdict =
            trust.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verdict {
            // verify-ca: the chain was checked before the name.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Chain => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl fmt::Display for ServerUrl {
    /// The URL with its password (in the user part or as a `password=`
    /// parameter) replaced by `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.raw))
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerUrl({self})")
    }
}

fn redact(raw: &str) -> String {
    let (scheme, rest) = raw.split_once("://").unwrap_or(("", raw));
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match before_query.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (before_query, None),
    };
    // The user part ends at the last '@' of the authority (a password may
    // itself hold an unescaped '@').
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:***@{host}"),
            None => format!("{user}@{host}"),
        },
        None => authority.to_string(),
    };
    let mut out = format!("{scheme}://{authority}");
    if let Some(p) = path {
        out.push('/');
        out.push_str(p);
    }
    if let Some(q) = query {
        let pairs: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some(("password", _)) => "password=***".to_string(),
                _ => pair.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown() {
        for (raw, shown) in [
            (
                "postgres://bot:s3cret@db.example:5432/memory",
                "postgres://bot:***@db.example:5432/memory",
            ),
            (
                "postgresql://bot:p@ss@db/memory?sslmode=require",
                "postgresql://bot:***@db/memory?sslmode=require",
            ),
            (
                "postgres://db/memory?user=bot&password=s3cret",
                "postgres://db/memory?user=bot&password=***",
            ),
            ("postgres://bot@db", "postgres://bot@db"),
        ] {
            let url = ServerUrl { raw: raw.into() };
            assert_eq!(url.to_string(), shown);
            assert!(!format!("{url:?}").contains("s3cret"));
        }
    }

    #[test]
    fn libpq_verify_modes_and_root_certs_are_understood() {
        use tokio_postgres::config::SslMode;
        let cases = [
            ("", SslMode::Prefer, Check::Nothing),
            ("?sslmode=disable", SslMode::Disable, Check::Nothing),
            ("?sslmode=allow", SslMode::Prefer, Check::Nothing),
            ("?sslmode=require", SslMode::Require, Check::Nothing),
            (
                "?sslmode=require&sslrootcert=/x.pem",
                SslMode::Require,
                Check::Chain,
            ),
            ("?sslmode=verify-ca", SslMode::Require, Check::Chain),
            (
                "?sslmode=verify-full&sslrootcert=/x.pem",
                SslMode::Require,
                Check::Full,
            ),
        ];
        for (query, mode, check) in cases {
            let url = ServerUrl::parse(&format!("postgres://u:p@h/d{query}")).unwrap();
            let (config, tls) = url.config().unwrap();
            assert_eq!((config.get_ssl_mode(), tls.check), (mode, check), "{query}");
        }
        let url = ServerUrl::parse("postgres://u:p@h/d?sslrootcert=/x.pem").unwrap();
        assert_eq!(
            url.config().unwrap().1.root_cert,
            Some(PathBuf::from("/x.pem"))
        );
        assert!(ServerUrl::parse("postgres://u:p@h/d?sslmode=sometimes").is_err());
        let err = ServerUrl::parse("postgres://u:s3cret@h/d?port=notaport").unwrap_err();
        assert!(!format!("{err:#}").contains("s3cret"), "{err:#}");
        assert!(ServerUrl::parse("postgres://u:p@h/d?bogus=1").is_err());
    }

    #[test]
    fn only_postgres_schemes_name_a_server() {
        assert!(is_server("postgres://h/d"));
        assert!(is_server("postgresql://h/d"));
        assert!(!is_server("./postgres://h"));
        assert!(!is_server("sessions.db"));
    }
}
