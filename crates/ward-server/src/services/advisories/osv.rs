//! Publishing: every advisory with an approved event as an OSV document
//! (`/osv/<CGA id>.json`, `/osv/all.json`, `/osv/all.zip`), and the public
//! advisory feed (`/advisory/v2/documents`, `/advisory/v2/metadata`). Only
//! approved events are published: what a scanner reads has been reviewed.
//! Without a token a caller sees the groups the server makes public
//! (`--public-advisories`); with one, also where it holds `advisories.list`.

use serde_json::{Value, json};
use ward_core::advisory::EventKind;
use ward_core::listing::{FilterValue, ListQuery};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::advisory::v2 as feed;
use ward_proto::vulnerabilities::v2::{Advisory, AdvisoryEvent, ReviewState, advisory_event, severity};
use ward_store::advisories::ADVISORY_TYPE;

use super::kind_of;
use crate::authz::Caller;
use crate::ward::Ward;

/// Advisories read per store round trip while exporting (each holds at most
/// 1 MiB of events).
const EXPORT_PAGE: u32 = 32;
/// Bytes of events the feed reads for one answer before it stops.
const FEED_BUDGET: usize = 16 * 1024 * 1024;
/// Most ids one metadata request may name (reference §8).
pub const MAX_METADATA_IDS: usize = 1000;
/// Most advisories one feed answer holds.
const MAX_FEED: u32 = 1000;
/// Default for the most bytes of OSV documents one export (`/osv/all.json`,
/// `/osv/all.zip`) holds (`--max-export-bytes`); a larger one is refused
/// (FAILED_PRECONDITION `EXPORT_TOO_LARGE`) and the paged feed serves it
/// instead.
pub const DEFAULT_MAX_EXPORT_BYTES: usize = 64 * 1024 * 1024;
/// Exports running at once on one server; one more is RESOURCE_EXHAUSTED.
pub const EXPORTS_AT_ONCE: usize = 2;

/// An export's documents (id, serialized OSV), and its slot among the
/// [`EXPORTS_AT_ONCE`], to be held until the response is sent.
pub struct Export {
    pub docs: Vec<(String, Vec<u8>)>,
    pub permit: tokio::sync::OwnedSemaphorePermit,
}

fn rfc3339(t: Option<&Timestamp>) -> String {
    let ms = t.map_or(0, Timestamp::to_millis);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Percent-encodes a purl component: everything but ASCII letters, digits
/// and `.-_~+` (so `?`, `#`, `&`, `/` and `%` in a name cannot change the
/// purl's structure).
fn purl_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b".-_~+".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The approved events, oldest first; the last is the advisory's status.
fn approved(a: &Advisory) -> Vec<&AdvisoryEvent> {
    let mut v: Vec<&AdvisoryEvent> = a
        .events
        .iter()
        .filter(|e| e.review_state == ReviewState::Approved as i32 && e.r#type.is_some())
        .collect();
    v.sort_by_key(|e| (e.create_time.as_ref().map_or(0, Timestamp::to_millis), e.uid.clone()));
    v
}

/// The OSV `severity` entry of a stored severity, when its score is a vector
/// of the kind OSV accepts.
fn osv_severity(s: &ward_proto::vulnerabilities::v2::Severity) -> Option<Value> {
    let (kind, prefix) = match severity::Type::try_from(s.r#type).ok()? {
        severity::Type::CvssV2 => ("CVSS_V2", "AV:"),
        severity::Type::CvssV3 => ("CVSS_V3", "CVSS:3."),
        severity::Type::CvssV4 => ("CVSS_V4", "CVSS:4.0/"),
        severity::Type::Unspecified => return None,
    };
    s.score
        .starts_with(prefix)
        .then(|| json!({"type": kind, "score": s.score}))
}

impl Ward {
    /// Where `caller` (None: anonymous) may read published advisories; `None`
    /// means everywhere.
    pub(crate) fn feed_scopes(&self, caller: Option<&Caller>) -> Option<Vec<Uidp>> {
        let mut scopes = self.public_advisories.clone();
        if let Some(c) = caller {
            scopes.extend(self.visible_scopes(c, ward_core::rpc::LIST_ADVISORIES.capability)?);
        }
        Some(scopes)
    }

    /// The advisory as an OSV document; `None` until an event is approved.
    pub fn osv_document(&self, a: &Advisory) -> Option<Value> {
        let events = approved(a);
        let latest = *events.last()?;
        let kind = kind_of(latest.r#type.as_ref()?);
        let namespace = self.osv_ecosystem.to_lowercase();
        let mut purl = format!("pkg:apk/{}/{}", purl_encode(&namespace), purl_encode(&a.artifact_name));
        if !a.artifact_architecture.is_empty() {
            purl.push_str("?arch=");
            purl.push_str(&purl_encode(&a.artifact_architecture));
        }
        let mut range_events = vec![json!({"introduced": "0"})];
        let fixed = match latest.r#type.as_ref()? {
            // A fix that does not order (kept by an import, flagged) decides
            // nothing: no `fixed` bound, so every version stays affected.
            advisory_event::Type::Fixed(f) if ward_core::apk::is_valid(&f.fixed_version) => {
                Some(f.fixed_version.clone())
            }
            advisory_event::Type::Patched(p) => p
                .patched_versions
                .iter()
                .filter_map(|v| ward_core::apk::parse(v).ok())
                .min()
                .map(|v| v.as_str().to_owned()),
            _ => None,
        };
        if let Some(v) = &fixed {
            range_events.push(json!({"fixed": v}));
        }
        let mut affected = json!({
            "package": {"ecosystem": self.osv_ecosystem, "name": a.artifact_name, "purl": purl},
            "ecosystem_specific": {
                "status": kind.status(),
                "components": [{
                    "component_name": a.component_name,
                    "component_location": a.component_location,
                    "component_type": a.component_type,
                    "latest_event_status": kind.osv_status(),
                    "latest_event_timestamp": rfc3339(latest.create_time.as_ref()),
                }],
            },
        });
        // Not affected, or no analysis planned: no claim on any version.
        if !matches!(
            kind,
            EventKind::FalsePositiveDetermination | EventKind::AnalysisNotPlanned
        ) {
            affected["ranges"] = json!([{"type": "ECOSYSTEM", "events": range_events}]);
        }
        let mut doc = json!({
            "schema_version": "1.7.0",
            "id": a.advisory_id,
            "modified": rfc3339(a.update_time.as_ref()),
            "published": rfc3339(a.create_time.as_ref()),
            "aliases": a.aliases,
            "affected": [affected],
            "database_specific": {"source": format!("{}/osv/{}.json", self.api_url, a.advisory_id)},
        });
        let severities: Vec<Value> = a.severities.iter().filter_map(osv_severity).collect();
        if !severities.is_empty() {
            doc["severity"] = Value::Array(severities);
        }
        Some(doc)
    }

    /// Published advisories matching `filters`, visible to `caller`, in uid
    /// order, at most `limit`, each with its origin package.
    async fn published(
        &self,
        caller: Option<&Caller>,
        filters: Vec<(&'static str, FilterValue)>,
        limit: u32,
        budget: usize,
    ) -> Result<Vec<(String, Advisory)>> {
        let mut q = ListQuery {
            filters,
            page_size: EXPORT_PAGE.min(limit),
            visible: self.feed_scopes(caller),
            ..Default::default()
        };
        q.filters.push(("delete_time", FilterValue::IsNull(true)));
        q.filters.push(("latest_type", FilterValue::AtLeast(1)));
        let mut out = Vec::new();
        loop {
            let page = self.store.list_advisories(&q).await?;
            let next = page.next.clone();
            let origins: Vec<String> = page.items.iter().map(|r| r.origin.clone()).collect();
            let (advisories, stopped) = self.with_events_within(page.items, budget).await?;
            out.extend(origins.into_iter().zip(advisories));
            if stopped {
                break;
            }
            match next {
                Some(c) if (out.len() as u32) < limit => q.after = Some(c),
                _ => break,
            }
        }
        out.truncate(limit as usize);
        Ok(out)
    }

    /// One advisory's OSV document, by CGA id.
    pub async fn osv_by_id(&self, caller: Option<&Caller>, advisory_id: &str) -> Result<Value> {
        let not_found = || Error::not_found(ADVISORY_TYPE, advisory_id);
        if !ward_core::advisory::is_cga(advisory_id) {
            return Err(not_found());
        }
        let found = self
            .published(
                caller,
                vec![("advisory_id", FilterValue::Text(advisory_id.into()))],
                1,
                usize::MAX,
            )
            .await?;
        found
            .first()
            .and_then(|(_, a)| self.osv_document(a))
            .ok_or_else(not_found)
    }

    /// Every published advisory `caller` may read, as OSV documents (each
    /// serialized, compact or `pretty`, with its id), in uid order. Read a
    /// page at a time: only one page's events are in memory beside the
    /// documents made so far, which are bounded by `--max-export-bytes`. At
    /// most [`EXPORTS_AT_ONCE`] run at once: the export holds its slot until
    /// its response has been sent (the caller keeps [`Export::permit`]).
    pub async fn osv_export(&self, caller: Option<&Caller>, pretty: bool) -> Result<Export> {
        let permit = self.export_permits.clone().try_acquire_owned().map_err(|_| {
            Error::ResourceExhausted(format!(
                "{EXPORTS_AT_ONCE} exports are running on this server; retry shortly"
            ))
        })?;
        let mut q = ListQuery {
            page_size: EXPORT_PAGE,
            visible: self.feed_scopes(caller),
            ..Default::default()
        };
        q.filters.push(("delete_time", FilterValue::IsNull(true)));
        q.filters.push(("latest_type", FilterValue::AtLeast(1)));
        let mut out = Vec::new();
        let mut bytes = 0usize;
        loop {
            let mut page = self.store.list_advisories(&q).await?;
            let next = page.next.take();
            for a in self.with_events(page.items).await? {
                let Some(doc) = self.osv_document(&a) else { continue };
                let text = if pretty {
                    serde_json::to_vec_pretty(&doc)
                } else {
                    serde_json::to_vec(&doc)
                }
                .map_err(Error::internal)?;
                bytes += text.len();
                if bytes > self.max_export_bytes {
                    return Err(Error::precondition(
                        "EXPORT_TOO_LARGE",
                        "/osv/all.json",
                        format!(
                            "the published advisories exceed {} bytes of OSV; \
                             read them through /advisory/v2/documents or /osv/<id>.json",
                            self.max_export_bytes
                        ),
                    ));
                }
                out.push((a.advisory_id, text));
            }
            match next {
                Some(c) => q.after = Some(c),
                None => return Ok(Export { docs: out, permit }),
            }
        }
    }

    /// `GET /advisory/v2/documents`: published advisories of one origin
    /// package (or with one of `cves`), grouped by origin.
    pub async fn list_documents(
        &self,
        caller: Option<&Caller>,
        req: feed::ListDocumentsRequest,
    ) -> Result<feed::ListDocumentsResponse> {
        let mut filters = Vec::new();
        if req.id.is_empty() && req.cves.is_empty() {
            return Err(Error::invalid("id", "name an origin package (id) or cves"));
        }
        if req.id.len() > super::MAX_NAME || req.cves.len() > MAX_METADATA_IDS {
            return Err(Error::invalid("id", "id or cves is too long"));
        }
        if !req.id.is_empty() {
            filters.push(("origin", FilterValue::Text(req.id.clone())));
        }
        if !req.cves.is_empty() {
            filters.push((
                "uid",
                FilterValue::In(ward_core::listing::SubQuery {
                    table: "advisory_aliases",
                    key: "advisory_uid",
                    filters: vec![("alias", FilterValue::AnyOf(req.cves.clone()))],
                }),
            ));
        }
        let advisories = self.published(caller, filters, MAX_FEED, FEED_BUDGET).await?;
        let namespace = self.osv_ecosystem.to_lowercase();
        let mut docs: std::collections::BTreeMap<String, feed::Document> = std::collections::BTreeMap::new();
        for (origin, a) in &advisories {
            let origin = origin.clone();
            let doc = docs.entry(origin.clone()).or_insert_with(|| feed::Document {
                id: origin,
                advisories: Vec::new(),
            });
            doc.advisories.push(feed::Advisory {
                id: a.advisory_id.clone(),
                events: approved(a).into_iter().filter_map(document_event).collect(),
                aliases: a.aliases.clone(),
                package_namespace: namespace.clone(),
            });
        }
        Ok(feed::ListDocumentsResponse {
            documents: docs.into_values().collect(),
        })
    }

    /// `GET /advisory/v2/metadata`: per vulnerability id, the severities and
    /// advisory links of the published advisories that alias it.
    pub async fn list_vulnerability_metadata(
        &self,
        caller: Option<&Caller>,
        req: feed::ListVulnerabilityMetadataRequest,
    ) -> Result<feed::ListVulnerabilityMetadataResponse> {
        let mut ids: Vec<String> = req
            .ids
            .iter()
            .chain(std::iter::once(&req.id))
            .filter(|s| !s.is_empty())
            .cloned()
            .collect();
        // Bounded as the request states them (before duplicates go), in
        // characters, as the document says.
        if req.ids.len() > MAX_METADATA_IDS {
            return Err(Error::invalid("ids", format!("at most {MAX_METADATA_IDS} ids")));
        }
        if ids.iter().any(|i| i.chars().count() > super::MAX_NAME) {
            return Err(Error::invalid(
                "ids",
                format!("an id is at most {} characters", super::MAX_NAME),
            ));
        }
        ids.sort();
        ids.dedup();
        let page_size = ward_core::listing::page_size(req.page_size)? as usize;
        let skip = ward_core::listing::skip(req.skip)? as usize;
        let advisories = self
            .published(
                caller,
                vec![(
                    "uid",
                    FilterValue::In(ward_core::listing::SubQuery {
                        table: "advisory_aliases",
                        key: "advisory_uid",
                        filters: vec![("alias", FilterValue::AnyOf(ids.clone()))],
                    }),
                )],
                MAX_FEED,
                FEED_BUDGET,
            )
            .await?;
        let mut all = Vec::new();
        for id in &ids {
            let related: Vec<&Advisory> = advisories
                .iter()
                .map(|(_, a)| a)
                .filter(|a| a.aliases.contains(id))
                .collect();
            if related.is_empty() {
                continue;
            }
            let mut severities: Vec<feed::Severity> = Vec::new();
            for s in related.iter().flat_map(|a| a.severities.iter()) {
                let s = feed::Severity {
                    r#type: s.r#type,
                    score: s.score.clone(),
                };
                if !severities.contains(&s) {
                    severities.push(s);
                }
            }
            all.push(feed::VulnerabilityMetadata {
                id: id.clone(),
                summary: String::new(),
                details: String::new(),
                references: related
                    .iter()
                    .map(|a| feed::Reference {
                        r#type: feed::reference::Type::Advisory as i32,
                        url: format!("{}/osv/{}.json", self.api_url, a.advisory_id),
                    })
                    .collect(),
                severities,
            });
        }
        let total = all.len();
        let start = if req.page_token.is_empty() {
            0
        } else {
            all.iter().position(|m| m.id > req.page_token).unwrap_or(total)
        };
        let page: Vec<_> = all.into_iter().skip(start + skip).take(page_size).collect();
        let next_page_token = match page.last() {
            Some(last) if start + skip + page.len() < total => last.id.clone(),
            _ => String::new(),
        };
        Ok(feed::ListVulnerabilityMetadataResponse {
            vulnerability_metadata: page,
            next_page_token,
            total_count: Some(total as i64),
            skipped: req.skip,
        })
    }
}

/// An approved event as the feed shows it (`patched` has no feed form).
fn document_event(e: &AdvisoryEvent) -> Option<feed::DocumentEvent> {
    use advisory_event::Type as T;
    use feed::document_event::Data as D;
    let data = match e.r#type.as_ref()? {
        T::Detection(d) => {
            use ward_proto::vulnerabilities::v2::detection::Type as S;
            let r#type = d.r#type.as_ref().map(|t| match t {
                S::Nvdapi(n) => feed::detection::Type::Nvdapi(feed::detection::NvdApi {
                    cpe_searched: n.cpe_searched.clone(),
                    cpe_found: n.cpe_found.clone(),
                }),
                S::Manual(_) => feed::detection::Type::Manual(feed::detection::Manual {}),
                S::Scanv1(s) => feed::detection::Type::Scanv1(feed::detection::ScanV1 {
                    subpackage_name: s.subpackage.clone(),
                    component_id: s.component_id.clone(),
                    component_name: s.component.clone(),
                    component_version: s.component_version.clone(),
                    component_type: s.component_type.clone(),
                    component_location: s.component_location.clone(),
                    scanner: s.scanner.clone(),
                    ..Default::default()
                }),
            });
            D::Detection(feed::Detection { r#type })
        }
        T::Fixed(f) => D::Fixed(feed::Fixed {
            fixed_version: f.fixed_version.clone(),
            ..Default::default()
        }),
        T::FalsePositiveDetermination(f) => D::FalsePositiveDetermination(feed::FalsePositiveDetermination {
            r#type: f.r#type,
            note: f.note.clone(),
        }),
        T::TruePositiveDetermination(x) => {
            D::TruePositiveDetermination(feed::TruePositiveDetermination { note: x.note.clone() })
        }
        T::AnalysisNotPlanned(x) => D::AnalysisNotPlanned(feed::AnalysisNotPlanned { note: x.note.clone() }),
        T::FixNotPlanned(x) => D::FixNotPlanned(feed::FixNotPlanned { note: x.note.clone() }),
        T::PendingUpstreamFix(x) => D::PendingUpstreamFix(feed::PendingUpstreamFix { note: x.note.clone() }),
        T::Patched(_) => return None,
    };
    Some(feed::DocumentEvent {
        timestamp: e.create_time,
        data: Some(data),
    })
}

#[cfg(test)]
mod tests {
    use super::purl_encode;

    #[test]
    fn purl_components_cannot_change_the_purl_structure() {
        assert_eq!(purl_encode("py3-yaml"), "py3-yaml");
        assert_eq!(purl_encode("a+b_c.d~e"), "a+b_c.d~e");
        assert_eq!(
            purl_encode("x?arch=evil#frag&y/z%"),
            "x%3Farch%3Devil%23frag%26y%2Fz%25"
        );
        assert_eq!(purl_encode("é"), "%C3%A9");
    }
}
