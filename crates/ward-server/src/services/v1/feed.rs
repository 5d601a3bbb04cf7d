//! The public v1 feeds: `chainguard.platform.advisory.SecurityAdvisory` as a
//! translation of the v2 advisory feed (same content and visibility: the
//! published advisories, plus what a token's `advisories.list` adds), and
//! `chainguard.platform.ping.PingService`. Neither needs a token.

use std::sync::Arc;

use ward_core::Result;
use ward_proto::advisory::{self as v1, v2};
use ward_proto::ping;

use crate::authz::Caller;
use crate::ward::Ward;

// ---- pure conversions ----

pub fn documents_out(r: v2::ListDocumentsResponse) -> v1::DocumentList {
    v1::DocumentList {
        items: r.documents.into_iter().map(document_out).collect(),
    }
}

pub fn document_out(d: v2::Document) -> v1::Document {
    v1::Document {
        id: d.id,
        advisories: d
            .advisories
            .into_iter()
            .map(|a| v1::Advisory {
                id: a.id,
                events: a.events.into_iter().map(event_out).collect(),
                aliases: a.aliases,
                package_namespace: a.package_namespace,
            })
            .collect(),
    }
}

/// One feed event. The payloads' numbers match except inside ScanV1, which
/// v1 numbers differently, so each is carried field by field. Fields only v1
/// has (scanner provenance of fixes and scans) are not in the v2 feed and
/// stay empty. FalsePositive types keep their numbers (`TYPE_*` becomes
/// `FPT_TYPE_*`).
pub fn event_out(e: v2::DocumentEvent) -> v1::Event {
    use v1::event::Data as A;
    use v2::document_event::Data as B;
    let data = e.data.map(|d| match d {
        B::TruePositiveDetermination(x) => A::TruePositiveDetermination(v1::TruePositiveDetermination { note: x.note }),
        B::FalsePositiveDetermination(x) => A::FalsePositiveDetermination(v1::FalsePositiveDetermination {
            r#type: x.r#type,
            note: x.note,
        }),
        B::Fixed(x) => A::Fixed(v1::Fixed {
            fixed_version: x.fixed_version,
            scanner_version: x.scanner_version,
            grype_db_built: x.grype_db_built,
            grype_db_checksum: x.grype_db_checksum,
        }),
        B::Detection(x) => A::Detection(detection_out(x)),
        B::AnalysisNotPlanned(x) => A::AnalysisNotPlanned(v1::AnalysisNotPlanned { note: x.note }),
        B::FixNotPlanned(x) => A::FixNotPlanned(v1::FixNotPlanned { note: x.note }),
        B::PendingUpstreamFix(x) => A::PendingUpstreamFix(v1::PendingUpstreamFix { note: x.note }),
    });
    v1::Event {
        timestamp: e.timestamp,
        data,
    }
}

fn detection_out(d: v2::Detection) -> v1::Detection {
    use v1::detection::Type as A;
    use v2::detection::Type as B;
    v1::Detection {
        r#type: d.r#type.map(|t| match t {
            B::Nvdapi(n) => A::Nvdapi(v1::detection::NvdApi {
                cpe_searched: n.cpe_searched,
                cpe_found: n.cpe_found,
            }),
            B::Manual(_) => A::Manual(v1::detection::Manual {}),
            B::Scanv1(s) => A::Scanv1(v1::detection::ScanV1 {
                scanner: s.scanner,
                subpackage_name: s.subpackage_name,
                component_id: s.component_id,
                component_name: s.component_name,
                component_version: s.component_version,
                component_type: s.component_type,
                component_location: s.component_location,
                artifact_version: s.artifact_version,
                scanner_version: s.scanner_version,
                grype_db_built: s.grype_db_built,
                grype_db_checksum: s.grype_db_checksum,
            }),
        }),
    }
}

pub fn metadata_filter_in(f: v1::VulnerabilityMetadataFilter) -> v2::ListVulnerabilityMetadataRequest {
    v2::ListVulnerabilityMetadataRequest {
        id: f.id,
        ids: f.ids,
        page_size: f.page_size,
        page_token: f.page_token,
        order_by: f.order_by,
        skip: f.skip,
    }
}

/// Reference and severity types keep their numbers (v1 names them without
/// the `TYPE_` prefix; v1's extra severity UBUNTU=4 never comes from v2).
pub fn metadata_out(r: v2::ListVulnerabilityMetadataResponse) -> v1::VulnerabilityMetadataList {
    v1::VulnerabilityMetadataList {
        items: r
            .vulnerability_metadata
            .into_iter()
            .map(|m| v1::VulnerabilityMetadata {
                id: m.id,
                summary: m.summary,
                details: m.details,
                references: m
                    .references
                    .into_iter()
                    .map(|x| v1::Reference {
                        r#type: x.r#type,
                        url: x.url,
                    })
                    .collect(),
                severity: m
                    .severities
                    .into_iter()
                    .map(|s| v1::Severity {
                        r#type: s.r#type,
                        score: s.score,
                    })
                    .collect(),
            })
            .collect(),
        next_page_token: r.next_page_token,
        total_count: r.total_count,
        skipped: r.skipped,
    }
}

// ---- operations ----

pub async fn list_documents(w: Arc<Ward>, c: Option<Caller>, f: v1::DocumentFilter) -> Result<v1::DocumentList> {
    let r = w
        .list_documents(c.as_ref(), v2::ListDocumentsRequest { id: f.id, cves: f.cves })
        .await?;
    Ok(documents_out(r))
}

pub async fn list_vulnerability_metadata(
    w: Arc<Ward>,
    c: Option<Caller>,
    f: v1::VulnerabilityMetadataFilter,
) -> Result<v1::VulnerabilityMetadataList> {
    let r = w.list_vulnerability_metadata(c.as_ref(), metadata_filter_in(f)).await?;
    Ok(metadata_out(r))
}

/// `PingService.Ping` (v1): the v2 answer.
pub async fn ping(_w: Arc<Ward>, _c: Option<Caller>, _req: ping::PingRequest) -> Result<ping::Response> {
    Ok(ping::Response {
        response: "pong".into(),
    })
}

/// The v1 shape of `ListResolvedVulnsReports` (`from`/`to`, `items`).
pub async fn list_resolved_vulns_reports(
    w: Arc<Ward>,
    c: Caller,
    f: v1::ResolvedVulnsReportFilter,
) -> Result<v1::ResolvedVulnsReportList> {
    let r = w
        .resolved_vulns_reports(
            &c,
            v2::ListResolvedVulnsReportsRequest {
                image_refs: f
                    .image_refs
                    .into_iter()
                    .map(|r| v2::ImageRef {
                        repo: r.repo,
                        tags: r.tags,
                    })
                    .collect(),
                start_time: f.from,
                end_time: f.to,
            },
        )
        .await?;
    Ok(v1::ResolvedVulnsReportList {
        items: r
            .resolved_vulns_reports
            .into_iter()
            .map(|d| v1::ResolvedVulnsReport {
                date: d.date,
                resolved_vulns: d
                    .resolved_vulns
                    .into_iter()
                    .map(|v| v1::ResolvedVuln {
                        id: v.id,
                        aliases: v.aliases,
                        cvss_severities: Vec::new(),
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// `ListResolvedVulnsReports` at v2 and v2beta1 (the same messages).
pub async fn list_resolved_vulns_reports_v2(
    w: Arc<Ward>,
    c: Caller,
    req: v2::ListResolvedVulnsReportsRequest,
) -> Result<v2::ListResolvedVulnsReportsResponse> {
    w.list_resolved_vulns_reports(&c, req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use ward_proto::Timestamp;

    #[test]
    fn false_positive_types_keep_their_numbers() {
        use v1::false_positive_determination::Type as A;
        use v2::false_positive_determination::Type as B;
        for (a, b) in [
            (A::FptTypeUnspecified, B::Unspecified),
            (
                A::FptTypeVulnerabilityRecordAnalysisContested,
                B::VulnerabilityRecordAnalysisContested,
            ),
            (
                A::FptTypeComponentVulnerabilityMismatch,
                B::ComponentVulnerabilityMismatch,
            ),
            (A::FptTypeVulnerableCodeVersionNotUsed, B::VulnerableCodeVersionNotUsed),
            (
                A::FptTypeVulnerableCodeNotIncludedInPackage,
                B::VulnerableCodeNotIncludedInPackage,
            ),
            (
                A::FptTypeVulnerableCodeNotInExecutionPath,
                B::VulnerableCodeNotInExecutionPath,
            ),
            (
                A::FptTypeVulnerableCodeCannotBeControlledByAdversary,
                B::VulnerableCodeCannotBeControlledByAdversary,
            ),
            (A::FptTypeInlineMitigationsExist, B::InlineMitigationsExist),
        ] {
            assert_eq!(a as i32, b as i32);
        }
        let e = event_out(v2::DocumentEvent {
            timestamp: Some(Timestamp::from_millis(3)),
            data: Some(v2::document_event::Data::FalsePositiveDetermination(
                v2::FalsePositiveDetermination {
                    r#type: B::InlineMitigationsExist as i32,
                    note: "n".into(),
                },
            )),
        });
        assert_eq!(e.timestamp, Some(Timestamp::from_millis(3)));
        assert_eq!(
            e.data,
            Some(v1::event::Data::FalsePositiveDetermination(
                v1::FalsePositiveDetermination {
                    r#type: A::FptTypeInlineMitigationsExist as i32,
                    note: "n".into(),
                }
            ))
        );
    }

    #[test]
    fn scans_are_carried_by_name() {
        let e = event_out(v2::DocumentEvent {
            timestamp: None,
            data: Some(v2::document_event::Data::Detection(v2::Detection {
                r#type: Some(v2::detection::Type::Scanv1(v2::detection::ScanV1 {
                    subpackage_name: "sub".into(),
                    component_id: "id".into(),
                    component_name: "name".into(),
                    component_version: "1".into(),
                    component_type: "go-module".into(),
                    component_location: "/bin/x".into(),
                    scanner: "grype".into(),
                    ..Default::default()
                })),
            })),
        });
        let Some(v1::event::Data::Detection(v1::Detection {
            r#type: Some(v1::detection::Type::Scanv1(s)),
        })) = e.data
        else {
            panic!("not a scan: {e:?}");
        };
        assert_eq!(
            (
                s.scanner.as_str(),
                s.subpackage_name.as_str(),
                s.component_name.as_str()
            ),
            ("grype", "sub", "name")
        );
        assert_eq!(s.component_location, "/bin/x");
        assert!(s.artifact_version.is_empty() && s.grype_db_built.is_empty());
    }

    #[test]
    fn documents_and_metadata_translate() {
        let d = documents_out(v2::ListDocumentsResponse {
            documents: vec![v2::Document {
                id: "openssl".into(),
                advisories: vec![v2::Advisory {
                    id: "CGA-aaaa-bbbb-cccc".into(),
                    events: vec![v2::DocumentEvent {
                        timestamp: None,
                        data: Some(v2::document_event::Data::Fixed(v2::Fixed {
                            fixed_version: "3.0.1".into(),
                            ..Default::default()
                        })),
                    }],
                    aliases: vec!["CVE-2024-1".into()],
                    package_namespace: "wolfi".into(),
                }],
            }],
        });
        let a = &d.items[0].advisories[0];
        assert_eq!(
            (d.items[0].id.as_str(), a.id.as_str()),
            ("openssl", "CGA-aaaa-bbbb-cccc")
        );
        assert_eq!((a.aliases.len(), a.package_namespace.as_str()), (1, "wolfi"));
        assert!(matches!(&a.events[0].data, Some(v1::event::Data::Fixed(f)) if f.fixed_version == "3.0.1"));

        let m = metadata_out(v2::ListVulnerabilityMetadataResponse {
            vulnerability_metadata: vec![v2::VulnerabilityMetadata {
                id: "CVE-2024-1".into(),
                summary: String::new(),
                details: String::new(),
                references: vec![v2::Reference {
                    r#type: v2::reference::Type::Advisory as i32,
                    url: "https://x/osv/CGA.json".into(),
                }],
                severities: vec![v2::Severity {
                    r#type: v2::severity::Type::CvssV3 as i32,
                    score: "CVSS:3.1/AV:N".into(),
                }],
            }],
            next_page_token: "CVE-2024-1".into(),
            total_count: Some(2),
            skipped: 1,
        });
        assert_eq!(m.items[0].references[0].r#type, v1::reference::Type::Advisory as i32);
        assert_eq!(m.items[0].severity[0].r#type, v1::severity::Type::CvssV3 as i32);
        assert_eq!(
            (m.next_page_token.as_str(), m.total_count, m.skipped),
            ("CVE-2024-1", Some(2), 1)
        );
        let f = metadata_filter_in(v1::VulnerabilityMetadataFilter {
            id: "a".into(),
            ids: vec!["b".into()],
            page_size: 5,
            page_token: "t".into(),
            order_by: "id asc".into(),
            skip: 2,
        });
        assert_eq!((f.id.as_str(), f.ids.len(), f.page_size, f.skip), ("a", 1, 5, 2));
    }
}
