//! Document routing, DSSE envelopes and in-toto statements.
//!
//! An SBOM reaches a registry either bare or as an attestation: an in-toto
//! statement (subjects by digest, a predicate type, the SBOM as predicate),
//! usually wrapped in a DSSE envelope whose payload is the base64 statement,
//! sometimes further wrapped in a Sigstore bundle. The statement's subjects
//! say which image the SBOM is about; checking them against the image the
//! caller is indexing keeps an attestation for one image from being filed
//! under another.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::{Error, Inventory, Limits, cyclonedx, json, spdx};

pub(crate) const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// An expected subject digest, "<algorithm>:<hex>", held lowercase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Digest {
    algorithm: String,
    hex: String,
}

impl Digest {
    pub(crate) fn parse(s: &str) -> Result<Digest, Error> {
        let bad = || Error::InvalidDigest {
            digest: s.chars().take(200).collect(),
        };
        let (algorithm, hex) = s.split_once(':').ok_or_else(bad)?;
        let alg_ok = !algorithm.is_empty()
            && algorithm
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !alg_ok || hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        Ok(Digest {
            algorithm: algorithm.to_ascii_lowercase(),
            hex: hex.to_ascii_lowercase(),
        })
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.algorithm, self.hex)
    }
}

/// Just enough of any top-level object to tell which kind of document it is;
/// serde skips everything else without building it.
#[derive(Deserialize)]
struct Probe {
    #[serde(rename = "spdxVersion")]
    spdx_version: Option<IgnoredAny>,
    #[serde(rename = "bomFormat")]
    bom_format: Option<IgnoredAny>,
    #[serde(rename = "payloadType")]
    payload_type: Option<IgnoredAny>,
    #[serde(rename = "dsseEnvelope")]
    dsse_envelope: Option<IgnoredAny>,
    #[serde(rename = "_type")]
    statement_type: Option<IgnoredAny>,
    #[serde(rename = "predicateType")]
    predicate_type: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "payloadType")]
    payload_type: String,
    payload: String,
}

#[derive(Deserialize)]
struct Bundle {
    #[serde(rename = "dsseEnvelope")]
    dsse_envelope: Envelope,
}

#[derive(Deserialize)]
struct Statement {
    #[serde(rename = "_type")]
    statement_type: Option<String>,
    #[serde(default)]
    subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    predicate_type: String,
    #[serde(default)]
    predicate: serde_json::Value,
}

#[derive(Deserialize)]
struct Subject {
    #[serde(default)]
    digest: BTreeMap<String, String>,
}

/// Parses any supported document (already checked against the size bound).
pub(crate) fn parse_document(bytes: &[u8], expected: Option<&Digest>, limits: &Limits) -> Result<Inventory, Error> {
    let probe: Probe = json::from_slice(bytes, "SBOM document", limits.max_depth)?;
    if probe.payload_type.is_some() {
        let envelope: Envelope = json::from_slice(bytes, "DSSE envelope", limits.max_depth)?;
        parse_envelope(envelope, expected, limits)
    } else if probe.dsse_envelope.is_some() {
        let bundle: Bundle = json::from_slice(bytes, "Sigstore bundle", limits.max_depth)?;
        parse_envelope(bundle.dsse_envelope, expected, limits)
    } else if probe.statement_type.is_some() || probe.predicate_type.is_some() {
        parse_statement(bytes, expected, limits)
    } else if probe.spdx_version.is_some() {
        spdx::parse(spdx::from_bytes(bytes, limits)?, limits)
    } else if probe.bom_format.is_some() {
        cyclonedx::parse(cyclonedx::from_bytes(bytes, limits)?, limits)
    } else {
        Err(Error::NotSbom {
            reason: "no spdxVersion, bomFormat, in-toto _type or DSSE payloadType".into(),
        })
    }
}

fn parse_envelope(envelope: Envelope, expected: Option<&Digest>, limits: &Limits) -> Result<Inventory, Error> {
    if !envelope.payload_type.eq_ignore_ascii_case(IN_TOTO_PAYLOAD_TYPE) {
        return Err(Error::Envelope {
            reason: format!(
                "payload type {:?} is not {IN_TOTO_PAYLOAD_TYPE}",
                envelope.payload_type.chars().take(200).collect::<String>()
            ),
        });
    }
    // DSSE allows standard or URL-safe base64, padded or not.
    let config = GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let standard = GeneralPurpose::new(&base64::alphabet::STANDARD, config);
    let url_safe = GeneralPurpose::new(&base64::alphabet::URL_SAFE, config);
    let payload = standard
        .decode(envelope.payload.trim())
        .or_else(|_| url_safe.decode(envelope.payload.trim()))
        .map_err(|e| Error::Envelope {
            reason: format!("payload is not base64: {e}"),
        })?;
    parse_statement(&payload, expected, limits)
}

fn parse_statement(bytes: &[u8], expected: Option<&Digest>, limits: &Limits) -> Result<Inventory, Error> {
    let statement: Statement = json::from_slice(bytes, "in-toto statement", limits.max_depth)?;
    match &statement.statement_type {
        Some(t) if t.starts_with("https://in-toto.io/Statement/") => {}
        other => {
            return Err(Error::Envelope {
                reason: format!(
                    "_type {:?} is not an in-toto statement",
                    other.as_deref().unwrap_or("").chars().take(200).collect::<String>()
                ),
            });
        }
    }
    if let Some(expected) = expected {
        let matches = statement.subject.iter().any(|s| {
            s.digest
                .get(&expected.algorithm)
                .is_some_and(|hex| hex.eq_ignore_ascii_case(&expected.hex))
        });
        if !matches {
            let found = statement
                .subject
                .iter()
                .flat_map(|s| s.digest.iter())
                .take(8)
                .map(|(alg, hex)| format!("{}:{}", alg, hex.chars().take(128).collect::<String>()))
                .collect();
            return Err(Error::SubjectMismatch {
                expected: expected.to_string(),
                found,
            });
        }
    }

    let kind = predicate_kind(&statement.predicate_type).ok_or_else(|| Error::UnsupportedPredicate {
        predicate_type: statement.predicate_type.chars().take(200).collect(),
    })?;
    // Some producers put the SBOM in the predicate as a JSON string.
    match (kind, statement.predicate) {
        (Kind::Spdx, serde_json::Value::String(s)) => {
            spdx::parse(spdx::from_bytes(json::strip_bom(s.as_bytes()), limits)?, limits)
        }
        (Kind::CycloneDx, serde_json::Value::String(s)) => {
            cyclonedx::parse(cyclonedx::from_bytes(json::strip_bom(s.as_bytes()), limits)?, limits)
        }
        (Kind::Spdx, value) => spdx::parse(json::from_value(value, "SPDX predicate")?, limits),
        (Kind::CycloneDx, value) => cyclonedx::parse(json::from_value(value, "CycloneDX predicate")?, limits),
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Spdx,
    CycloneDx,
}

/// SPDX predicates are `https://spdx.dev/Document` with or without a version
/// suffix; CycloneDX ones `https://cyclonedx.org/bom` likewise.
fn predicate_kind(predicate_type: &str) -> Option<Kind> {
    let t = predicate_type.trim_end_matches('/');
    let under = |base: &str| t == base || t.strip_prefix(base).is_some_and(|r| r.starts_with('/'));
    if under("https://spdx.dev/Document") {
        Some(Kind::Spdx)
    } else if under("https://cyclonedx.org/bom") {
        Some(Kind::CycloneDx)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests() {
        let d = Digest::parse("sha256:ABCDEF0123").unwrap();
        assert_eq!(d.to_string(), "sha256:abcdef0123");
        for bad in ["", "sha256", "sha256:", ":abcd", "sha256:xyz", "sha 256:ab"] {
            assert!(Digest::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn predicate_types() {
        assert!(matches!(predicate_kind("https://spdx.dev/Document"), Some(Kind::Spdx)));
        assert!(matches!(
            predicate_kind("https://spdx.dev/Document/v2.3"),
            Some(Kind::Spdx)
        ));
        assert!(matches!(
            predicate_kind("https://cyclonedx.org/bom/v1.5"),
            Some(Kind::CycloneDx)
        ));
        assert!(matches!(
            predicate_kind("https://cyclonedx.org/bom"),
            Some(Kind::CycloneDx)
        ));
        assert!(predicate_kind("https://spdx.dev/Documentary").is_none());
        assert!(predicate_kind("https://slsa.dev/provenance/v1").is_none());
    }
}
