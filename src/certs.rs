//! Certificates for the webhook and extender endpoints (`tephra certs`, and the self-signed pair
//! `tephra serve` makes when it is given no files).
//!
//! ```text
//!   tephra-webhook-ca (10 y, CA:TRUE pathlen 0) ──signs──▶ serving cert (1 y, serverAuth)
//!        │                                                  SAN: svc, svc.ns, svc.ns.svc,
//!        ▼                                                       svc.ns.svc.cluster.local
//!   caBundle in the webhook configurations           tls.crt + tls.key in a `kubernetes.io/tls` Secret
//! ```
//!
//! A CA and a leaf rather than one self-signed certificate: clients trust the CA (a CA
//! certificate as trust anchor is what every TLS stack expects; a self-signed *leaf* as anchor
//! is refused by some), the leaf carries the Service names and `serverAuth`, and the layout is
//! the one cert-manager's CA issuer produces, so both ways of making certificates look alike to
//! the server. The CA's key is dropped after signing: a leaked `ca.crt` can sign nothing, and a
//! rotation makes a new CA (see `certs/README.md` for the order that avoids downtime).
//! Keys are ECDSA P-256: kube-apiserver (Go `crypto/tls`), rustls with ring, and every other
//! TLS client in use verify it, and generating one is instant.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// The CA lives inside every webhook configuration's `caBundle`; replacing it means re-patching
/// all of them, so it is long-lived (10 years). Its key is written beside it (`ca.key`, mode
/// 0600) only so `tephra certs --renew-serving` can issue the next serving certificate under
/// the same CA; keep that file out of the cluster.
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// The serving certificate's key sits in a Secret on every node running tephra; one year bounds
/// the useful life of a leaked key while keeping rotations (which the server picks up without
/// a restart) a yearly chore.
const LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// Certificates are back-dated a little so that a node whose clock runs slightly behind the one
/// that made them does not reject them as "not yet valid".
const BACKDATE: Duration = Duration::from_secs(3600);

/// File names written by [`CertBundle::write_to`], the same keys a `kubernetes.io/tls` Secret
/// uses (`tls.crt`, `tls.key`) plus the CA.
pub const CA_FILE: &str = "ca.crt";
/// The serving certificate file name.
pub const CERT_FILE: &str = "tls.crt";
/// The serving key file name (written with mode 0600).
pub const KEY_FILE: &str = "tls.key";
/// The CA's private key file name (written with mode 0600), read by `--renew-serving`.
pub const CA_KEY_FILE: &str = "ca.key";

/// Errors from making or writing certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A Service or namespace name that cannot appear in a DNS name.
    #[error("invalid {what} {value:?}: {reason}")]
    InvalidName {
        /// `service` or `namespace`.
        what: &'static str,
        /// The value given.
        value: String,
        /// Why it was refused (Kubernetes' wording of the DNS-1123 label rule).
        reason: String,
    },
    /// rcgen refused the parameters or could not sign.
    #[error("generating certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file or directory could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The path that failed.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A certificate file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A certificate file holds no usable PEM certificate.
    #[error("{} is not a PEM certificate file: {reason}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The certificate does not verify against the CA the webhooks would be registered with.
    #[error("{} is not signed by {ca} for {name}: {reason}", cert.display())]
    Untrusted {
        /// The certificate file.
        cert: PathBuf,
        /// Where the CA came from (a file, or "the CA certificates in the same file").
        ca: String,
        /// The name that was checked.
        name: String,
        /// The verifier's reason.
        reason: String,
    },
}

impl CertError {
    /// A short, fixed label for metrics and log fields.
    pub fn metric_label(&self) -> &'static str {
        match self {
            CertError::InvalidName { .. } => "invalid_name",
            CertError::Generate(_) => "generate",
            CertError::Write { .. } => "write",
            CertError::Read { .. } => "read",
            CertError::Parse { .. } => "parse",
            CertError::Untrusted { .. } => "untrusted",
        }
    }
}

/// A CA and a serving certificate signed by it, all PEM encoded.
#[derive(Clone)]
pub struct CertBundle {
    /// The CA certificate (the `caBundle` of the webhook configurations, decoded).
    pub ca_cert_pem: String,
    /// The serving certificate followed by the CA that signed it (`tls.crt`). A chain that
    /// holds its CA lets a reader of `tls.crt` alone (`serve --embedded --tls-cert`) trust it;
    /// TLS clients that already trust the CA ignore the extra certificate.
    pub cert_pem: String,
    /// The serving certificate's private key, PKCS#8 (`tls.key`).
    pub key_pem: String,
    /// The CA's private key, PKCS#8 (`ca.key`).
    pub ca_key_pem: String,
    ca_cert_der: Vec<u8>,
}

impl std::fmt::Debug for CertBundle {
    // Never print the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertBundle")
            .field("ca_cert_pem", &self.ca_cert_pem)
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl CertBundle {
    /// The CA certificate, base64 of its PEM, as webhook configurations' `caBundle` wants it.
    ///
    /// The field is a Go `[]byte`, so it is standard base64 of the PEM text (not of the DER).
    pub fn ca_bundle_base64(&self) -> String {
        base64_std(self.ca_cert_pem.as_bytes())
    }

    /// The CA certificate in DER form (for building a client trust store).
    pub fn ca_cert_der(&self) -> &[u8] {
        &self.ca_cert_der
    }

    /// Writes `ca.crt`, `tls.crt` and `tls.key` (mode 0600) into `dir`, creating it if needed.
    ///
    /// Each file is written to a temporary name and renamed into place, so a server reloading
    /// them never reads half a file.
    pub fn write_to(&self, dir: &Path) -> Result<(), CertError> {
        std::fs::create_dir_all(dir).map_err(|source| CertError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        // Key first: a server that reloads between the two renames then sees a new key with the
        // old certificate, which fails to load (mismatch) and is retried, rather than the reverse.
        write_atomic(&dir.join(KEY_FILE), self.key_pem.as_bytes(), 0o600)?;
        write_atomic(&dir.join(CERT_FILE), self.cert_pem.as_bytes(), 0o644)?;
        write_atomic(&dir.join(CA_FILE), self.ca_cert_pem.as_bytes(), 0o644)?;
        write_atomic(&dir.join(CA_KEY_FILE), self.ca_key_pem.as_bytes(), 0o600)?;
        Ok(())
    }

    /// Writes only `tls.key` and `tls.crt` (a renewed serving certificate; the CA stays).
    pub fn write_serving_to(&self, dir: &Path) -> Result<(), CertError> {
        write_atomic(&dir.join(KEY_FILE), self.key_pem.as_bytes(), 0o600)?;
        write_atomic(&dir.join(CERT_FILE), self.cert_pem.as_bytes(), 0o644)?;
        Ok(())
    }
}

/// The four names a Service is reached by from inside the cluster, the API server using the
/// third (`svc.ns.svc`) for webhooks.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A CA and a serving certificate for `service` in `namespace` (see [`service_dns_names`]).
pub fn generate(service: &str, namespace: &str) -> Result<CertBundle, CertError> {
    check_dns_label("service", service)?;
    check_dns_label("namespace", namespace)?;
    let names = service_dns_names(service, namespace);
    issue(&format!("{service}.{namespace}.svc"), &names)
}

/// A CA and a serving certificate for arbitrary names (DNS names or IP addresses), used by
/// `tephra serve` when no certificate files are given.
pub fn self_signed(names: &[String]) -> Result<CertBundle, CertError> {
    let cn = names.first().map(String::as_str).unwrap_or("tephra");
    issue(cn, names)
}

/// `tephra certs --service S --namespace NS --out DIR`: makes the bundle, writes it, and returns
/// the base64 `caBundle` for the caller to print. With `renew_serving`, the CA already in
/// `DIR` (`ca.crt`, `ca.key`) signs a new serving certificate and only `tls.crt`/`tls.key` are
/// replaced: the `caBundle` (printed again) does not change.
pub fn run_certs_command(
    service: &str,
    namespace: &str,
    extra_names: &[String],
    out_dir: &Path,
    renew_serving: bool,
) -> Result<String, CertError> {
    check_dns_label("service", service)?;
    check_dns_label("namespace", namespace)?;
    let mut names = service_dns_names(service, namespace);
    names.extend(extra_names.iter().cloned());
    let cn = format!("{service}.{namespace}.svc");
    if renew_serving {
        let bundle = renew_with_ca(out_dir, &cn, &names)?;
        bundle.write_serving_to(out_dir)?;
        return Ok(bundle.ca_bundle_base64());
    }
    let bundle = issue(&cn, &names)?;
    bundle.write_to(out_dir)?;
    Ok(bundle.ca_bundle_base64())
}

/// A new serving certificate for `names` signed by the CA in `dir` (`ca.crt`, `ca.key`).
pub fn renew_with_ca(
    dir: &Path,
    common_name: &str,
    names: &[String],
) -> Result<CertBundle, CertError> {
    let read = |file: &str| {
        let path = dir.join(file);
        std::fs::read_to_string(&path).map_err(|source| CertError::Read { path, source })
    };
    let (ca_pem, ca_key_pem) = (read(CA_FILE)?, read(CA_KEY_FILE)?);
    let issuer = issuer_from_pem(&ca_pem, &ca_key_pem, dir)?;
    let ca_chain = PemChain::parse(&dir.join(CA_FILE), ca_pem.as_bytes())?;
    let ca_der = ca_chain.leaf().to_vec();
    let now = SystemTime::now();
    let (leaf_pem, key_pem) = sign_leaf(common_name, names, &issuer, now, LEAF_VALIDITY)?;
    let chain = PemChain::parse(&dir.join(CERT_FILE), leaf_pem.as_bytes())?;
    let check_name = names.first().map_or(common_name, String::as_str);
    verify_chain(
        &chain,
        &ca_chain.certs,
        &dir.join(CA_FILE).display().to_string(),
        check_name,
    )?;
    Ok(CertBundle {
        cert_pem: format!("{leaf_pem}{ca_pem}"),
        ca_cert_pem: ca_pem,
        key_pem,
        ca_key_pem,
        ca_cert_der: ca_der,
    })
}

/// The names a serving certificate is valid for: the DNS names and IP addresses of its
/// subjectAltName (TLS clients ignore the common name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertNames {
    /// DNS names, wildcards (`*.ns.svc`) included, as written.
    pub dns: Vec<String>,
    /// IP addresses.
    pub ips: Vec<IpAddr>,
}

impl std::fmt::Display for CertNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let all: Vec<String> = self
            .dns
            .iter()
            .cloned()
            .chain(self.ips.iter().map(IpAddr::to_string))
            .collect();
        if all.is_empty() {
            f.write_str("no DNS name or IP address (no subjectAltName)")
        } else {
            f.write_str(&all.join(", "))
        }
    }
}

/// A PEM certificate file read whole: the serving certificate first, then whatever chain
/// follows it.
#[derive(Debug, Clone)]
pub struct PemChain {
    /// The file it came from (for messages).
    pub path: PathBuf,
    /// The certificates, leaf first.
    pub certs: Vec<CertificateDer<'static>>,
}

impl PemChain {
    /// Reads `path`; at least one certificate is required.
    pub fn read(path: &Path) -> Result<Self, CertError> {
        let bytes = std::fs::read(path).map_err(|source| CertError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &bytes)
    }

    /// Parses PEM text read from `path`.
    pub fn parse(path: &Path, pem: &[u8]) -> Result<Self, CertError> {
        let parse_err = |reason: String| CertError::Parse {
            path: path.to_path_buf(),
            reason,
        };
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| parse_err(e.to_string()))?;
        if certs.is_empty() {
            return Err(parse_err("no PEM CERTIFICATE block found".into()));
        }
        Ok(Self {
            path: path.to_path_buf(),
            certs,
        })
    }

    /// The serving certificate.
    pub fn leaf(&self) -> &CertificateDer<'static> {
        // `parse` refuses an empty file, so there is always a first certificate.
        &self.certs[0]
    }

    /// The certificates after the serving one.
    pub fn rest(&self) -> &[CertificateDer<'static>] {
        &self.certs[1..]
    }

    /// The names the serving certificate is valid for.
    pub fn names(&self) -> Result<CertNames, CertError> {
        let parse_err = |reason: String| CertError::Parse {
            path: self.path.clone(),
            reason,
        };
        let (_, cert) = x509_parser::parse_x509_certificate(self.leaf())
            .map_err(|e| parse_err(format!("the first certificate is not X.509: {e}")))?;
        let mut names = CertNames::default();
        let san = cert
            .subject_alternative_name()
            .map_err(|e| parse_err(format!("unreadable subjectAltName: {e}")))?;
        for name in san.iter().flat_map(|s| s.value.general_names.iter()) {
            match name {
                x509_parser::extensions::GeneralName::DNSName(d) => names.dns.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(ip) => {
                    let ip = match ip.len() {
                        4 => <[u8; 4]>::try_from(*ip).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(*ip).ok().map(IpAddr::from),
                        _ => None,
                    };
                    names.ips.extend(ip);
                }
                _ => {}
            }
        }
        Ok(names)
    }

    /// PEM text of some of the certificates (for a webhook `caBundle`).
    pub fn pem_of(certs: &[CertificateDer<'_>]) -> String {
        certs
            .iter()
            .map(|c| {
                let b64 = base64_std(c.as_ref());
                let lines: Vec<&str> = b64
                    .as_bytes()
                    .chunks(64)
                    .map(|l| std::str::from_utf8(l).unwrap_or_default())
                    .collect();
                format!(
                    "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                    lines.join("\n")
                )
            })
            .collect()
    }
}

/// Checks that the serving certificate of `chain` verifies for `name` with `roots` as trust
/// anchors, exactly as the embedded API's webhook client (rustls, ring) will check it.
/// `ca_label` says where `roots` came from, for the message.
pub fn verify_chain(
    chain: &PemChain,
    roots: &[CertificateDer<'static>],
    ca_label: &str,
    name: &str,
) -> Result<(), CertError> {
    use rustls::client::danger::ServerCertVerifier;
    let untrusted = |reason: String| CertError::Untrusted {
        cert: chain.path.clone(),
        ca: ca_label.to_string(),
        name: name.to_string(),
        reason,
    };
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store
            .add(root.clone())
            .map_err(|e| untrusted(format!("unusable CA certificate: {e}")))?;
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(store),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| untrusted(e.to_string()))?;
    let server_name = ServerName::try_from(name.to_string())
        .map_err(|e| untrusted(format!("{name:?} is not a host name: {e}")))?;
    verifier
        .verify_server_cert(
            chain.leaf(),
            chain.rest(),
            &server_name,
            &[],
            UnixTime::now(),
        )
        .map(|_| ())
        .map_err(|e| untrusted(e.to_string()))
}

/// An rcgen issuer for the CA certificate `ca_pem` (its first certificate) and its key.
///
/// The issuer is rebuilt from the CA's subject (organization and common name, as tephra writes
/// them) and its key; callers verify what it signs, so a CA made elsewhere with a richer
/// subject is refused with a clear message rather than producing an unusable pair. `dir`
/// only labels errors (the files `ca.crt`/`ca.key` in it).
fn issuer_from_pem(
    ca_pem: &str,
    ca_key_pem: &str,
    dir: &Path,
) -> Result<Issuer<'static, KeyPair>, CertError> {
    let parse = |file: &str, reason: String| CertError::Parse {
        path: dir.join(file),
        reason,
    };
    let ca_key = KeyPair::from_pem(ca_key_pem).map_err(|e| parse(CA_KEY_FILE, e.to_string()))?;
    let ca_chain = PemChain::parse(&dir.join(CA_FILE), ca_pem.as_bytes())?;
    let (_, parsed) = x509_parser::parse_x509_certificate(ca_chain.leaf())
        .map_err(|e| parse(CA_FILE, e.to_string()))?;
    let text = |it: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue<'_>>| {
        it.next().and_then(|a| a.as_str().ok()).map(str::to_string)
    };
    let mut dn = DistinguishedName::new();
    if let Some(o) = text(&mut parsed.subject().iter_organization()) {
        dn.push(DnType::OrganizationName, o);
    }
    if let Some(cn) = text(&mut parsed.subject().iter_common_name()) {
        dn.push(DnType::CommonName, cn);
    }
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = dn;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    Ok(Issuer::new(ca_params, ca_key))
}

/// A CA certificate and its private key, PEM encoded (`--tls-mode self`).
#[derive(Clone)]
pub struct CaPair {
    /// The CA certificate.
    pub cert_pem: String,
    /// Its private key, PKCS#8.
    pub key_pem: String,
}

impl std::fmt::Debug for CaPair {
    // Never print the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaPair")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// How far back a certificate valid for `validity` is dated: an hour (a node whose clock runs
/// a little behind still accepts it), but at most a tenth of its life, so the short lifetimes
/// tests use are not mostly in the past.
fn backdate_for(validity: Duration) -> Duration {
    BACKDATE.min(validity / 10)
}

/// A new CA valid for `validity` from `now`, for `--tls-mode self`. Its common name carries the
/// time it was made, so two CAs trusted side by side during a rotation have distinct subjects
/// (clients then pick the right issuer by name before trying signatures).
pub fn new_ca(validity: Duration, now: SystemTime) -> Result<CaPair, CertError> {
    let since_epoch = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(&format!(
        "tephra-webhook-ca-{}{:03}",
        since_epoch.as_secs(),
        since_epoch.subsec_millis()
    ));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = now
        .checked_sub(backdate_for(validity))
        .unwrap_or(now)
        .into();
    params.not_after = (now + validity).into();
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(CaPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A serving certificate for `names` valid for `validity` from `now`, signed by `ca`, and its
/// key: (`tls.crt` = the certificate followed by the CA, `tls.key`). Checked against the CA
/// for the first name before it is returned.
pub fn sign_serving(
    ca: &CaPair,
    common_name: &str,
    names: &[String],
    validity: Duration,
    now: SystemTime,
) -> Result<(String, String), CertError> {
    let label = Path::new("<tls-mode self>");
    let issuer = issuer_from_pem(&ca.cert_pem, &ca.key_pem, label)?;
    let (leaf_pem, key_pem) = sign_leaf_backdated(
        common_name,
        names,
        &issuer,
        now,
        validity,
        backdate_for(validity),
    )?;
    let chain = format!("{leaf_pem}{}", ca.cert_pem);
    let parsed = PemChain::parse(label, chain.as_bytes())?;
    let ca_chain = PemChain::parse(label, ca.cert_pem.as_bytes())?;
    let check_name = names.first().map_or(common_name, String::as_str);
    verify_chain(&parsed, &ca_chain.certs, "the new CA", check_name)?;
    Ok((chain, key_pem))
}

fn issue(common_name: &str, names: &[String]) -> Result<CertBundle, CertError> {
    let now = SystemTime::now();
    let not_before = now.checked_sub(BACKDATE).unwrap_or(now);

    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = distinguished_name("tephra-webhook-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = not_before.into();
    ca_params.not_after = (now + CA_VALIDITY).into();
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca_params, ca_key);
    let (leaf_pem, key_pem) = sign_leaf(common_name, names, &issuer, now, LEAF_VALIDITY)?;

    Ok(CertBundle {
        ca_cert_pem: ca_cert.pem(),
        cert_pem: format!("{leaf_pem}{}", ca_cert.pem()),
        key_pem,
        ca_key_pem,
        ca_cert_der: ca_cert.der().to_vec(),
    })
}

/// A serving certificate for `names` signed by `issuer`: its PEM and its key's PEM.
fn sign_leaf(
    common_name: &str,
    names: &[String],
    issuer: &Issuer<'_, KeyPair>,
    now: SystemTime,
    validity: Duration,
) -> Result<(String, String), CertError> {
    sign_leaf_backdated(common_name, names, issuer, now, validity, BACKDATE)
}

/// [`sign_leaf`] dated `backdate` before `now`.
fn sign_leaf_backdated(
    common_name: &str,
    names: &[String],
    issuer: &Issuer<'_, KeyPair>,
    now: SystemTime,
    validity: Duration,
    backdate: Duration,
) -> Result<(String, String), CertError> {
    let not_before = now.checked_sub(backdate).unwrap_or(now);
    let mut leaf_params = CertificateParams::new(names.to_vec())?;
    leaf_params.distinguished_name = distinguished_name(common_name);
    leaf_params.is_ca = IsCa::ExplicitNoCa;
    leaf_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf_params.use_authority_key_identifier_extension = true;
    leaf_params.not_before = not_before.into();
    leaf_params.not_after = (now + validity).into();
    let leaf_key = KeyPair::generate()?;
    let leaf_cert = leaf_params.signed_by(&leaf_key, issuer)?;
    Ok((leaf_cert.pem(), leaf_key.serialize_pem()))
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "tephra");
    dn.push(DnType::CommonName, common_name);
    dn
}

/// RFC 1123 label, as Kubernetes requires for Service and namespace names.
pub(crate) fn check_dns_label(what: &'static str, value: &str) -> Result<(), CertError> {
    let errors = tephra_names::dns1123_label_errors(value);
    if errors.is_empty() {
        return Ok(());
    }
    Err(CertError::InvalidName {
        what,
        value: value.to_string(),
        reason: errors.join("; "),
    })
}

fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), CertError> {
    let err = |source| CertError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    let mut file = options.open(&tmp).map_err(err)?;
    // `mode` only applies when the file is created; a stale temporary file keeps its old bits.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(err)?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    file.write_all(contents).map_err(err)?;
    file.sync_all().map_err(err)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(err)
}

/// Standard base64 (with padding), as Go encodes `[]byte` fields. Kubernetes' own `ByteString`
/// does exactly this, so use it rather than a second implementation.
fn base64_std(bytes: &[u8]) -> String {
    match serde_json::to_value(k8s_openapi::ByteString(bytes.to_vec())) {
        Ok(serde_json::Value::String(s)) => s,
        // ByteString always serializes to a string; nothing else can come back.
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use std::sync::Arc;

    fn verifier(ca_pem: &str) -> Arc<rustls::client::WebPkiServerVerifier> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
            .unwrap();
        rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap()
    }

    fn verify(
        v: &rustls::client::WebPkiServerVerifier,
        leaf_pem: &str,
        name: &str,
    ) -> Result<(), rustls::Error> {
        use rustls::client::danger::ServerCertVerifier;
        let leaf = CertificateDer::from_pem_slice(leaf_pem.as_bytes()).unwrap();
        v.verify_server_cert(
            &leaf,
            &[],
            &ServerName::try_from(name.to_string()).unwrap(),
            &[],
            UnixTime::now(),
        )
        .map(|_| ())
    }

    #[test]
    fn leaf_is_signed_by_the_ca_for_every_service_name() {
        let b = generate("tephra", "volcano-system").unwrap();
        let v = verifier(&b.ca_cert_pem);
        for name in [
            "tephra",
            "tephra.volcano-system",
            "tephra.volcano-system.svc",
            "tephra.volcano-system.svc.cluster.local",
        ] {
            verify(&v, &b.cert_pem, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        // A name not in the SAN list is refused.
        assert!(verify(&v, &b.cert_pem, "other.volcano-system.svc").is_err());
    }

    #[test]
    fn another_ca_does_not_verify_the_leaf() {
        let a = generate("tephra", "ns").unwrap();
        let b = generate("tephra", "ns").unwrap();
        let v = verifier(&b.ca_cert_pem);
        assert!(verify(&v, &a.cert_pem, "tephra.ns.svc").is_err());
    }

    #[test]
    fn self_signed_covers_ip_and_dns_names() {
        let b = self_signed(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        let v = verifier(&b.ca_cert_pem);
        verify(&v, &b.cert_pem, "localhost").unwrap();
        verify(&v, &b.cert_pem, "127.0.0.1").unwrap();
    }

    #[test]
    fn ca_bundle_is_base64_of_the_ca_pem() {
        let b = generate("svc", "ns").unwrap();
        let bundle = b.ca_bundle_base64();
        assert!(bundle.starts_with("LS0tLS1CRUdJTi")); // "-----BEGIN"
        let decoded: k8s_openapi::ByteString =
            serde_json::from_value(serde_json::Value::String(bundle)).unwrap();
        assert_eq!(decoded.0, b.ca_cert_pem.as_bytes());
        assert_eq!(base64_std(b"hi?"), "aGk/");
        assert_eq!(base64_std(b"h"), "aA==");
    }

    #[test]
    fn bad_names_are_refused_with_the_reason() {
        for (svc, ns) in [("", "ns"), ("Svc", "ns"), ("svc", "-ns"), ("s.v", "ns")] {
            let err = generate(svc, ns).unwrap_err();
            assert_eq!(err.metric_label(), "invalid_name", "{svc}/{ns}");
        }
        let long = "a".repeat(64);
        assert!(
            generate(&long, "ns")
                .unwrap_err()
                .to_string()
                .contains("63")
        );
    }

    #[test]
    fn run_certs_command_writes_the_three_files_with_a_private_key_mode() {
        let dir = std::env::temp_dir().join(format!("tephra-certs-unit-{}", std::process::id()));
        let bundle = run_certs_command("tephra", "default", &[], &dir, false).unwrap();
        let ca = std::fs::read_to_string(dir.join(CA_FILE)).unwrap();
        let crt = std::fs::read_to_string(dir.join(CERT_FILE)).unwrap();
        let key = std::fs::read_to_string(dir.join(KEY_FILE)).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(crt.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_eq!(bundle, base64_std(ca.as_bytes()));
        verify(&verifier(&ca), &crt, "tephra.default.svc").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn renew_serving_keeps_the_ca_and_replaces_the_serving_pair() {
        let dir = std::env::temp_dir().join(format!("tephra-certs-renew-{}", std::process::id()));
        let first = run_certs_command("tephra", "default", &[], &dir, false).unwrap();
        let ca_key_mode = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(dir.join(CA_KEY_FILE))
                .unwrap()
                .permissions()
                .mode()
        };
        assert_eq!(ca_key_mode & 0o777, 0o600);
        let old_crt = std::fs::read_to_string(dir.join(CERT_FILE)).unwrap();
        let old_key = std::fs::read_to_string(dir.join(KEY_FILE)).unwrap();
        let again =
            run_certs_command("tephra", "default", &["127.0.0.1".into()], &dir, true).unwrap();
        assert_eq!(first, again, "the caBundle does not change");
        let ca = std::fs::read_to_string(dir.join(CA_FILE)).unwrap();
        let crt = std::fs::read_to_string(dir.join(CERT_FILE)).unwrap();
        assert_ne!(crt, old_crt);
        assert_ne!(
            std::fs::read_to_string(dir.join(KEY_FILE)).unwrap(),
            old_key
        );
        verify(&verifier(&ca), &crt, "tephra.default.svc").unwrap();
        verify(&verifier(&ca), &crt, "127.0.0.1").unwrap();
        // Without a CA in the folder, renewal says which file is missing.
        let empty = dir.join("empty");
        let e = run_certs_command("tephra", "default", &[], &empty, true).unwrap_err();
        assert!(e.to_string().contains("ca.crt"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let b = generate("svc", "ns").unwrap();
        assert!(!format!("{b:?}").contains("PRIVATE KEY"));
    }
}
