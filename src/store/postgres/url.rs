//! A PostgreSQL server's address as people give it (`postgres://…`), and
//! how we connect to it: TLS through rustls, the password never shown.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, bail};
use postgres::config::SslMode;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How long one connection attempt may take before we call the server
/// unreachable (a black-holed address would otherwise hang the turn).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a `--db` value names a server rather than a file.
pub fn is_server(value: &str) -> bool {
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

    /// The driver's configuration and our TLS settings. libpq's
    /// `sslmode=verify-ca|verify-full` and `sslrootcert` are understood
    /// here: rustls always verifies the certificate, so both verify modes
    /// mean "TLS required", and `sslrootcert` replaces the system roots.
    pub fn config(&self) -> anyhow::Result<(postgres::Config, Tls)> {
        let (base, query) = match self.raw.split_once('?') {
            Some((b, q)) => (b, q),
            None => (self.raw.as_str(), ""),
        };
        let mut kept = Vec::new();
        let mut root_cert = None;
        let mut verify = false;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match (key, value) {
                ("sslmode", "verify-ca" | "verify-full") => {
                    verify = true;
                    kept.push("sslmode=require".to_string());
                }
                ("sslrootcert", path) => root_cert = Some(PathBuf::from(path)),
                _ => kept.push(pair.to_string()),
            }
        }
        let cleaned = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let mut config: postgres::Config = cleaned
            .parse()
            .with_context(|| format!("{self} is not a PostgreSQL URL libpq would accept"))?;
        if config.get_hosts().is_empty() {
            bail!("{self} names no host");
        }
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("duduclaw-session");
        if verify && config.get_ssl_mode() == SslMode::Disable {
            config.ssl_mode(SslMode::Require);
        }
        Ok((config, Tls { root_cert }))
    }
}

/// Where the TLS roots come from.
pub struct Tls {
    root_cert: Option<PathBuf>,
}

impl Tls {
    /// A connector for the driver. Used only when the server is asked for
    /// TLS (`sslmode=prefer`, the default, or `require`).
    pub fn connector(&self) -> anyhow::Result<MakeRustlsConnect> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = match &self.root_cert {
            None => {
                // The system's roots are loaded once per process.
                static SYSTEM: OnceLock<MakeRustlsConnect> = OnceLock::new();
                if let Some(c) = SYSTEM.get() {
                    return Ok(c.clone());
                }
                use rustls_platform_verifier::ConfigVerifierExt;
                let config = rustls::ClientConfig::with_platform_verifier()
                    .context("could not load the system's TLS roots")?;
                return Ok(SYSTEM
                    .get_or_init(|| MakeRustlsConnect::new(config))
                    .clone());
            }
            Some(path) => {
                let mut roots = rustls::RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .with_context(|| format!("could not read sslrootcert {}", path.display()))?;
                for cert in certs {
                    roots
                        .add(cert)
                        .with_context(|| format!("a bad certificate in {}", path.display()))?;
                }
                rustls::ClientConfig::builder()
                    .with_root_certificates(Arc::new(roots))
                    .with_no_client_auth()
            }
        };
        Ok(MakeRustlsConnect::new(config))
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
        let url =
            ServerUrl::parse("postgres://u:p@h/d?sslmode=verify-full&sslrootcert=/x.pem").unwrap();
        let (config, tls) = url.config().unwrap();
        assert_eq!(config.get_ssl_mode(), SslMode::Require);
        assert_eq!(tls.root_cert, Some(PathBuf::from("/x.pem")));
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
