//! Bounded parsers for untrusted software inventories.
//!
//! Everything this crate reads comes from whoever pushed an image: SBOM documents
//! (SPDX 2.2/2.3 JSON, CycloneDX 1.4–1.6 JSON, in-toto statements, optionally in a
//! DSSE envelope) and image layers (tar, gzip or zstd) holding apk and dpkg
//! databases, Python and npm metadata. So every parser here is pure (no I/O beyond
//! the reader it is handed), bounded by [`Limits`], and answers malformed or
//! hostile input with an [`Error`], never a panic or an unbounded allocation.
//!
//! The output is an [`Inventory`]: packages keyed by canonical package URL
//! ([`Purl`]), which is what vulnerability matching joins on.

mod apk;
mod cyclonedx;
mod decompress;
mod dpkg;
mod dsse;
mod json;
mod layers;
mod npm;
mod purl;
mod python;
mod spdx;

use std::fmt;
use std::str::FromStr;

pub use layers::LayerScanner;
pub use purl::{Purl, canonical_purl, pypi_normalize};

/// Bounds on untrusted input. The defaults fit real images and SBOMs with
/// room to spare; each bound exists to stop one kind of resource exhaustion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest SBOM document or DSSE envelope, in bytes (default 32 MiB).
    pub max_document_bytes: usize,
    /// Most packages one inventory may list (default 100 000).
    pub max_components: usize,
    /// Deepest JSON nesting accepted (default 64). Checked by a byte scan before
    /// any recursive parsing, so deep input cannot exhaust the stack.
    pub max_depth: usize,
    /// Most bytes one layer may decompress to (default 4 GiB): the zip-bomb guard.
    pub max_layer_bytes: u64,
    /// Most tar entries in one layer (default 1 000 000).
    pub max_entries: u64,
    /// Longest tar entry path, in bytes (default 4096).
    pub max_path_bytes: usize,
    /// Largest single metadata file kept from a layer (default 16 MiB; an apk
    /// database can be several MB).
    pub max_file_bytes: u64,
    /// Most bytes of metadata files held at once across an image (default 256 MiB).
    pub max_kept_bytes: u64,
    /// Longest package name, version, license or purl, in bytes (default 4096).
    pub max_field_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_document_bytes: 32 << 20,
            max_components: 100_000,
            max_depth: 64,
            max_layer_bytes: 4 << 30,
            max_entries: 1_000_000,
            max_path_bytes: 4096,
            max_file_bytes: 16 << 20,
            max_kept_bytes: 256 << 20,
            max_field_bytes: 4096,
        }
    }
}

impl Limits {
    /// Rejects a field longer than [`Limits::max_field_bytes`]. `context` says
    /// where it was found ("in the SPDX document", "in /lib/apk/db/installed").
    pub(crate) fn check_field(&self, context: &str, field: &'static str, value: &str) -> Result<(), Error> {
        if value.len() > self.max_field_bytes {
            return Err(Error::FieldTooLong {
                context: context.to_owned(),
                field,
                len: value.len(),
                limit: self.max_field_bytes,
            });
        }
        Ok(())
    }
}

/// Where a package was learned from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Spdx,
    CycloneDx,
    Apk,
    Dpkg,
    Python,
    Npm,
}

impl Source {
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::Spdx => "spdx",
            Source::CycloneDx => "cyclonedx",
            Source::Apk => "apk",
            Source::Dpkg => "dpkg",
            Source::Python => "python",
            Source::Npm => "npm",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The unknown name given to [`Source::from_str`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown package source {0:?}: expected spdx, cyclonedx, apk, dpkg, python or npm")]
pub struct UnknownSource(pub String);

impl FromStr for Source {
    type Err = UnknownSource;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "spdx" => Source::Spdx,
            "cyclonedx" => Source::CycloneDx,
            "apk" => Source::Apk,
            "dpkg" => Source::Dpkg,
            "python" => Source::Python,
            "npm" => Source::Npm,
            other => return Err(UnknownSource(other.to_owned())),
        })
    }
}

/// One installed package.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Package {
    /// The name as its source wrote it (the purl holds the normalized form).
    pub name: String,
    pub version: String,
    /// Canonical package URL ([`Purl`]'s `Display`); always set.
    pub purl: String,
    /// The purl type: "apk", "deb", "pypi", "npm", "golang", "maven", …
    pub purl_type: String,
    /// The purl namespace, decoded ("wolfi", "debian", "org.apache.commons", "@angular").
    pub namespace: Option<String>,
    pub license: Option<String>,
    pub source: Source,
    /// Path inside the image, for layer-derived packages.
    pub location: Option<String>,
}

impl Package {
    /// Builds a package whose purl, type and namespace all come from `purl`,
    /// so the three can never disagree. An RPM purl's `epoch` qualifier
    /// (how Syft and the purl spec write it, the version then without one)
    /// goes in front of the version: `1:1.1.1k-7.el8` is compared as RPM
    /// compares it, not as epoch 0.
    pub(crate) fn from_purl(
        purl: &Purl,
        name: String,
        version: String,
        license: Option<String>,
        source: Source,
        location: Option<String>,
    ) -> Package {
        let version = match purl.qualifier("epoch") {
            Some(epoch) if purl.ty == "rpm" && epoch != "0" && !version.contains(':') => {
                format!("{epoch}:{version}")
            }
            _ => version,
        };
        Package {
            name,
            version,
            purl: purl.to_string(),
            purl_type: purl.ty.clone(),
            namespace: purl.namespace.clone(),
            license,
            source,
            location,
        }
    }
}

/// What an SBOM or an image's layers say is installed.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Inventory {
    /// Deduplicated by purl, sorted by purl.
    pub packages: Vec<Package>,
    /// "spdx-2.3", "cyclonedx-1.5", … or None for layers.
    pub format: Option<String>,
    /// Creator tool(s) named by the SBOM, comma separated.
    pub tool: Option<String>,
    /// Creation time as the SBOM wrote it (RFC 3339).
    pub generated_at: Option<String>,
    /// The SBOM's document name (SPDX) or subject component name (CycloneDX).
    pub name: Option<String>,
    /// Package-like entries left out for want of a usable purl, name or version.
    pub skipped: u64,
}

/// Why an SBOM or a layer was refused. Messages name the bound or the place.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("SBOM is {size} bytes, over the {limit}-byte bound")]
    DocumentTooLarge { size: usize, limit: usize },
    /// `what` is "JSON" for raw nesting, "CycloneDX component" for component trees.
    #[error("{what} nesting is over {limit} levels")]
    TooDeep { what: &'static str, limit: usize },
    #[error("malformed JSON in {what}: {source}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("not an SPDX 2.2/2.3 or CycloneDX 1.4-1.6 JSON document: {reason}")]
    NotSbom { reason: String },
    #[error("{what} lists over {limit} packages")]
    TooManyComponents { what: String, limit: usize },
    #[error("{field} {context} is {len} bytes, over the {limit}-byte bound")]
    FieldTooLong {
        context: String,
        field: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("invalid package URL {purl:?}: {reason}")]
    InvalidPurl { purl: String, reason: &'static str },
    #[error("invalid DSSE envelope or in-toto statement: {reason}")]
    Envelope { reason: String },
    #[error("in-toto predicate type {predicate_type:?} is neither SPDX nor CycloneDX")]
    UnsupportedPredicate { predicate_type: String },
    #[error(
        "no subject of the in-toto statement has digest {expected} (subjects: {})",
        if found.is_empty() { "none".to_owned() } else { found.join(", ") }
    )]
    SubjectMismatch { expected: String, found: Vec<String> },
    #[error("invalid digest {digest:?}: expected <algorithm>:<hex>")]
    InvalidDigest { digest: String },
    #[error("layer {layer} decompresses past {limit} bytes")]
    LayerTooLarge { layer: usize, limit: u64 },
    #[error("layer {layer} has over {limit} tar entries")]
    TooManyEntries { layer: usize, limit: u64 },
    #[error("tar entry path over {limit} bytes ({len} bytes) in layer {layer}")]
    PathTooLong { layer: usize, len: u64, limit: usize },
    #[error("{path} in layer {layer} is {size} bytes, over the {limit}-byte bound for one metadata file")]
    FileTooLarge {
        layer: usize,
        path: String,
        size: u64,
        limit: u64,
    },
    #[error("metadata files kept from the image pass {limit} bytes")]
    KeptTooLarge { limit: u64 },
    #[error("layer {layer} is compressed with {compression}, which is not supported")]
    UnsupportedCompression { layer: usize, compression: &'static str },
    /// The layer's bytes are not valid gzip, zstd or tar.
    #[error("malformed layer {layer}: {reason}")]
    MalformedLayer { layer: usize, reason: String },
    /// The reader handed to [`LayerScanner::add_layer`] itself failed.
    #[error("reading layer {layer}: {source}")]
    Io {
        layer: usize,
        #[source]
        source: std::io::Error,
    },
}

/// Parses an SBOM document: SPDX 2.2/2.3 JSON, CycloneDX 1.4–1.6 JSON, an
/// in-toto statement whose predicate is one of those, or a DSSE envelope
/// (`{"payloadType":"application/vnd.in-toto+json","payload":<base64>,…}`, also
/// inside a Sigstore bundle's `dsseEnvelope`) around such a statement.
///
/// For statements, `subject_digest` ("sha256:<hex>"), when given, must be the
/// digest of one of the statement's subjects, else [`Error::SubjectMismatch`]:
/// an attestation about another image says nothing about this one. A bare SBOM
/// names no subject digest, so the argument does not apply to it. Signatures
/// are not verified here; that is the caller's policy.
pub fn parse_sbom(bytes: &[u8], subject_digest: Option<&str>, limits: &Limits) -> Result<Inventory, Error> {
    if bytes.len() > limits.max_document_bytes {
        return Err(Error::DocumentTooLarge {
            size: bytes.len(),
            limit: limits.max_document_bytes,
        });
    }
    let expected = subject_digest.map(dsse::Digest::parse).transpose()?;
    dsse::parse_document(json::strip_bom(bytes), expected.as_ref(), limits)
}

/// Gathers packages while enforcing the per-inventory package bound, then
/// sorts and deduplicates them.
pub(crate) struct Collector<'a> {
    pub(crate) limits: &'a Limits,
    /// Names the document in the "lists over N packages" error.
    what: String,
    packages: Vec<Package>,
    pub(crate) skipped: u64,
}

impl<'a> Collector<'a> {
    pub(crate) fn new(limits: &'a Limits, what: impl Into<String>) -> Self {
        Collector {
            limits,
            what: what.into(),
            packages: Vec::new(),
            skipped: 0,
        }
    }

    /// Counts one package-like entry; fails once the bound is passed, whether
    /// or not the entry turns out usable, so skipped entries cannot be used to
    /// make us do unbounded work either.
    pub(crate) fn count(&mut self, seen: usize) -> Result<(), Error> {
        if seen > self.limits.max_components {
            return Err(Error::TooManyComponents {
                what: self.what.clone(),
                limit: self.limits.max_components,
            });
        }
        Ok(())
    }

    /// Adds a package, or skips (and counts) one whose text holds a
    /// character no stored text may (control, bidirectional-override,
    /// zero-width): it would display as another package.
    pub(crate) fn push(&mut self, package: Package) -> Result<(), Error> {
        let text = [Some(&package.name), Some(&package.version), package.license.as_ref()];
        if text
            .into_iter()
            .flatten()
            .any(|t| t.chars().any(ward_core::names::is_forbidden_char))
        {
            self.skip();
            return Ok(());
        }
        self.count(self.packages.len() + 1)?;
        self.packages.push(package);
        Ok(())
    }

    pub(crate) fn skip(&mut self) {
        self.skipped += 1;
    }

    pub(crate) fn finish(self) -> Inventory {
        let mut packages = self.packages;
        // Stable sort: among duplicates the first seen wins, and a later
        // duplicate may only fill in a license the first lacked.
        packages.sort_by(|a, b| a.purl.cmp(&b.purl));
        let mut out: Vec<Package> = Vec::with_capacity(packages.len());
        for p in packages {
            match out.last_mut() {
                Some(last) if last.purl == p.purl => {
                    if last.license.is_none() {
                        last.license = p.license;
                    }
                }
                _ => out.push(p),
            }
        }
        Inventory {
            packages: out,
            skipped: self.skipped,
            ..Inventory::default()
        }
    }
}
