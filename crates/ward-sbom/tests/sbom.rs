//! SBOM documents: SPDX, CycloneDX, in-toto statements and DSSE envelopes.

mod common;

use common::*;
use ward_sbom::{Error, Inventory, Limits, Source, parse_sbom};

fn parse(doc: &str) -> Inventory {
    parse_sbom(doc.as_bytes(), None, &Limits::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn purls(inv: &Inventory) -> Vec<&str> {
    inv.packages.iter().map(|p| p.purl.as_str()).collect()
}

#[test]
fn spdx_from_syft() {
    let inv = parse(SPDX_SYFT);
    assert_eq!(inv.format.as_deref(), Some("spdx-2.3"));
    assert_eq!(inv.tool.as_deref(), Some("syft-0.100.0"));
    assert_eq!(inv.generated_at.as_deref(), Some("2024-01-15T10:20:30Z"));
    assert_eq!(inv.name.as_deref(), Some("registry.example.com/team/app"));
    assert_eq!(
        purls(&inv),
        [
            "pkg:apk/wolfi/busybox@1.36.1-r5?arch=x86_64&distro=wolfi-20230201",
            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u4?arch=amd64&distro=debian-12&upstream=glibc",
            "pkg:pypi/django-rest-framework@3.14.0",
            "pkg:pypi/requests@2.31.0",
        ]
    );
    // The purl-less vendored package is skipped and counted; the image root is not counted.
    assert_eq!(inv.skipped, 1);

    let busybox = &inv.packages[0];
    assert_eq!(busybox.name, "busybox");
    assert_eq!(busybox.version, "1.36.1-r5");
    assert_eq!(busybox.purl_type, "apk");
    assert_eq!(busybox.namespace.as_deref(), Some("wolfi"));
    assert_eq!(busybox.license.as_deref(), Some("GPL-2.0-only"));
    assert_eq!(busybox.source, Source::Spdx);
    assert_eq!(busybox.location, None);

    let libc = &inv.packages[1];
    assert_eq!(libc.version, "2.36-9+deb12u4");
    assert_eq!(libc.license, None, "NOASSERTION is not a license");

    let drf = &inv.packages[2];
    assert_eq!(drf.name, "Django_Rest_Framework");
    assert_eq!(inv.packages[3].license.as_deref(), Some("Apache-2.0"));
}

#[test]
fn spdx_2_2_and_missing_fields() {
    // 2.2 with documentDescribes; name and version only in the purl; version
    // only in versionInfo; a package with neither version.
    let doc = r#"{"spdxVersion":"SPDX-2.2","SPDXID":"SPDXRef-DOCUMENT","name":"d",
      "documentDescribes":["SPDXRef-root"],
      "packages":[
        {"SPDXID":"SPDXRef-root","name":"root"},
        {"SPDXID":"SPDXRef-a","externalRefs":[{"referenceCategory":"PACKAGE_MANAGER","referenceType":"purl","referenceLocator":"pkg:golang/github.com/gorilla/mux@v1.8.1"}]},
        {"SPDXID":"SPDXRef-b","name":"commons-io","versionInfo":"2.15.1","externalRefs":[{"referenceType":"purl","referenceLocator":"pkg:maven/commons-io/commons-io"}]},
        {"SPDXID":"SPDXRef-c","name":"nover","externalRefs":[{"referenceType":"purl","referenceLocator":"pkg:npm/nover"}]},
        {"SPDXID":"SPDXRef-d","name":"bad","versionInfo":"1","externalRefs":[{"referenceType":"purl","referenceLocator":"not a purl"}]}
      ]}"#;
    let inv = parse(doc);
    assert_eq!(inv.format.as_deref(), Some("spdx-2.2"));
    assert_eq!(inv.tool, None);
    assert_eq!(
        purls(&inv),
        [
            "pkg:golang/github.com/gorilla/mux@v1.8.1",
            "pkg:maven/commons-io/commons-io@2.15.1"
        ]
    );
    let mux = &inv.packages[0];
    assert_eq!((mux.name.as_str(), mux.version.as_str()), ("mux", "v1.8.1"));
    assert_eq!(mux.namespace.as_deref(), Some("github.com/gorilla"));
    assert_eq!(inv.skipped, 2);
}

#[test]
fn spdx_other_versions_are_refused() {
    let doc = r#"{"spdxVersion":"SPDX-2.1","packages":[]}"#;
    let err = parse_sbom(doc.as_bytes(), None, &Limits::default()).unwrap_err();
    assert!(matches!(err, Error::NotSbom { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("not an SPDX 2.2/2.3 or CycloneDX 1.4-1.6 JSON document"),
        "{err}"
    );
}

#[test]
fn cyclonedx_from_cyclonedx_py() {
    let inv = parse(CDX_PY);
    assert_eq!(inv.format.as_deref(), Some("cyclonedx-1.5"));
    assert_eq!(
        inv.tool.as_deref(),
        Some("cyclonedx-py 4.2.3, cyclonedx-python-lib 6.4.4")
    );
    assert_eq!(inv.generated_at.as_deref(), Some("2024-02-01T12:00:00.123456+00:00"));
    assert_eq!(inv.name.as_deref(), Some("myapp"));
    assert_eq!(
        purls(&inv),
        [
            "pkg:pypi/charset-normalizer@3.3.2",
            "pkg:pypi/requests@2.31.0",
            "pkg:pypi/typing-extensions@4.9.0",
            "pkg:pypi/urllib3@2.1.0",
        ],
        "metadata.component is the subject, not a package"
    );
    let licenses: Vec<Option<&str>> = inv.packages.iter().map(|p| p.license.as_deref()).collect();
    assert_eq!(licenses, [Some("MIT License"), Some("Apache-2.0"), None, Some("MIT")]);
    assert!(inv.packages.iter().all(|p| p.source == Source::CycloneDx));
    // local-thing has no purl; the README file component is not package-like.
    assert_eq!(inv.skipped, 1);
}

#[test]
fn cyclonedx_nested_components_and_1_4_tools() {
    let doc = r#"{"bomFormat":"CycloneDX","specVersion":"1.4","version":1,
      "metadata":{"timestamp":"2023-05-05T05:05:05Z","tools":[{"vendor":"CycloneDX","name":"cyclonedx-maven-plugin","version":"2.7.9"}]},
      "components":[
        {"type":"library","group":"org.apache.commons","name":"commons-text","version":"1.10.0","purl":"pkg:maven/org.apache.commons/commons-text@1.10.0?type=jar",
         "licenses":[{"license":{"id":"Apache-2.0"}}],
         "components":[
           {"type":"library","name":"commons-lang3","version":"3.12.0","purl":"pkg:maven/org.apache.commons/commons-lang3@3.12.0?type=jar",
            "components":[
              {"type":"library","name":"deep","version":"1","purl":"pkg:cargo/deep@1"},
              {"type":"library","name":"nopurl","version":"1"}
            ]}
         ]},
        {"type":"library","name":"left-pad","version":"1.3.0","purl":"pkg:npm/left-pad@1.3.0","licenses":[{"license":{"id":"WTFPL"}},{"license":{"id":"MIT"}}]},
        {"type":"library","name":"core","version":"7.23.0","purl":"pkg:npm/@babel/core@7.23.0"}
      ]}"#;
    let inv = parse(doc);
    assert_eq!(inv.format.as_deref(), Some("cyclonedx-1.4"));
    assert_eq!(inv.tool.as_deref(), Some("cyclonedx-maven-plugin 2.7.9"));
    assert_eq!(
        purls(&inv),
        [
            "pkg:cargo/deep@1",
            "pkg:maven/org.apache.commons/commons-lang3@3.12.0?type=jar",
            "pkg:maven/org.apache.commons/commons-text@1.10.0?type=jar",
            "pkg:npm/%40babel/core@7.23.0",
            "pkg:npm/left-pad@1.3.0",
        ]
    );
    assert_eq!(inv.skipped, 1);
    let babel = &inv.packages[3];
    assert_eq!(babel.namespace.as_deref(), Some("@babel"));
    assert_eq!(inv.packages[4].license.as_deref(), Some("WTFPL AND MIT"));
}

#[test]
fn an_rpm_purls_epoch_goes_in_front_of_its_version() {
    let doc = r#"{"bomFormat":"CycloneDX","specVersion":"1.5","components":[
        {"type":"library","name":"openssl","version":"1:1.1.1k-7.el8",
         "purl":"pkg:rpm/almalinux/openssl@1.1.1k-7.el8?arch=x86_64&epoch=1&distro=almalinux-8"},
        {"type":"library","name":"zlib","purl":"pkg:rpm/almalinux/zlib@1.2.11-25.el8?epoch=0"},
        {"type":"library","name":"bash","purl":"pkg:rpm/almalinux/bash@2:4.4.20-5.el8"}]}"#;
    let inv = parse(doc);
    let versions: Vec<(&str, &str)> = inv
        .packages
        .iter()
        .map(|p| (p.name.as_str(), p.version.as_str()))
        .collect();
    assert_eq!(
        versions,
        [
            ("bash", "2:4.4.20-5.el8"),
            ("openssl", "1:1.1.1k-7.el8"),
            ("zlib", "1.2.11-25.el8")
        ]
    );
}

#[test]
fn cyclonedx_versions() {
    for (v, ok) in [
        ("1.3", false),
        ("1.4", true),
        ("1.5", true),
        ("1.6", true),
        ("2.0", false),
    ] {
        let doc = format!(r#"{{"bomFormat":"CycloneDX","specVersion":"{v}","components":[]}}"#);
        let r = parse_sbom(doc.as_bytes(), None, &Limits::default());
        assert_eq!(r.is_ok(), ok, "{v}: {r:?}");
    }
    let doc = r#"{"bomFormat":"SomethingElse","specVersion":"1.5"}"#;
    assert!(matches!(
        parse_sbom(doc.as_bytes(), None, &Limits::default()),
        Err(Error::NotSbom { .. })
    ));
}

#[test]
fn dsse_envelope_with_spdx_predicate() {
    let st = statement("https://spdx.dev/Document", DIGEST, SPDX_SYFT);
    let env = envelope(&st);
    let limits = Limits::default();

    let inv = parse_sbom(env.as_bytes(), Some(&format!("sha256:{DIGEST}")), &limits).unwrap();
    assert_eq!(inv, parse(SPDX_SYFT));
    assert_eq!(inv.packages.len(), 4);

    // Digest comparison ignores hex case; no expected digest means no check.
    let upper = format!("sha256:{}", DIGEST.to_uppercase());
    assert!(parse_sbom(env.as_bytes(), Some(&upper), &limits).is_ok());
    assert!(parse_sbom(env.as_bytes(), None, &limits).is_ok());

    let err = parse_sbom(env.as_bytes(), Some(&format!("sha256:{OTHER_DIGEST}")), &limits).unwrap_err();
    match &err {
        Error::SubjectMismatch { expected, found } => {
            assert_eq!(expected, &format!("sha256:{OTHER_DIGEST}"));
            assert_eq!(found, &[format!("sha256:{DIGEST}")]);
        }
        other => panic!("expected SubjectMismatch, got {other}"),
    }
    assert!(err.to_string().contains("no subject"), "{err}");

    let err = parse_sbom(env.as_bytes(), Some("sha256"), &limits).unwrap_err();
    assert!(matches!(err, Error::InvalidDigest { .. }), "{err}");
}

#[test]
fn statements_bare_versioned_and_stringified() {
    let limits = Limits::default();
    let want = format!("sha256:{DIGEST}");
    // A bare statement, CycloneDX predicate with a versioned type.
    let st = statement("https://cyclonedx.org/bom/v1.5", DIGEST, CDX_PY);
    let inv = parse_sbom(st.as_bytes(), Some(&want), &limits).unwrap();
    assert_eq!(inv.format.as_deref(), Some("cyclonedx-1.5"));
    assert_eq!(inv.packages.len(), 4);
    let err = parse_sbom(st.as_bytes(), Some(&format!("sha256:{OTHER_DIGEST}")), &limits).unwrap_err();
    assert!(matches!(err, Error::SubjectMismatch { .. }));

    // The predicate as a JSON string, in-toto v1 statement type.
    let quoted = serde_json::to_string(SPDX_SYFT).unwrap();
    let st = statement("https://spdx.dev/Document/v2.3", DIGEST, &quoted).replace("Statement/v0.1", "Statement/v1");
    let inv = parse_sbom(envelope(&st).as_bytes(), Some(&want), &limits).unwrap();
    assert_eq!(inv.format.as_deref(), Some("spdx-2.3"));

    // Inside a Sigstore bundle.
    let bundle = format!(
        r#"{{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{{}},"dsseEnvelope":{}}}"#,
        envelope(&statement("https://spdx.dev/Document", DIGEST, SPDX_SYFT))
    );
    assert_eq!(
        parse_sbom(bundle.as_bytes(), Some(&want), &limits)
            .unwrap()
            .packages
            .len(),
        4
    );
}

#[test]
fn statements_that_are_not_sboms() {
    let limits = Limits::default();
    let slsa = statement("https://slsa.dev/provenance/v1", DIGEST, "{}");
    let err = parse_sbom(envelope(&slsa).as_bytes(), None, &limits).unwrap_err();
    assert!(matches!(err, Error::UnsupportedPredicate { .. }), "{err}");

    let wrong_type = envelope("{}").replace("application/vnd.in-toto+json", "text/plain");
    let err = parse_sbom(wrong_type.as_bytes(), None, &limits).unwrap_err();
    assert!(matches!(err, Error::Envelope { .. }), "{err}");

    let not_b64 = r#"{"payloadType":"application/vnd.in-toto+json","payload":"!!!","signatures":[]}"#;
    let err = parse_sbom(not_b64.as_bytes(), None, &limits).unwrap_err();
    assert!(matches!(err, Error::Envelope { .. }), "{err}");

    // The predicate type says SPDX but the predicate is not one.
    let liar = statement("https://spdx.dev/Document", DIGEST, r#"{"hello":"world"}"#);
    let err = parse_sbom(liar.as_bytes(), None, &limits).unwrap_err();
    assert!(matches!(err, Error::NotSbom { .. }), "{err}");
}

#[test]
fn text_that_displays_as_other_text_is_skipped() {
    let doc = r#"{"bomFormat":"CycloneDX","specVersion":"1.5","components":[
        {"type":"library","name":"ok","version":"1.0","purl":"pkg:pypi/ok@1.0"},
        {"type":"library","name":"evil","version":"1.0\u202e","purl":"pkg:pypi/evil"},
        {"type":"library","name":"zw\u200bsp","version":"1.0","purl":"pkg:pypi/zwsp@1.0"},
        {"type":"library","name":"lic","version":"1.0","purl":"pkg:pypi/lic@1.0",
         "licenses":[{"license":{"name":"MIT\u001b[31m"}}]}]}"#;
    let inv = parse(doc);
    assert_eq!(purls(&inv), ["pkg:pypi/ok@1.0"]);
    assert_eq!(inv.skipped, 3);
}

#[test]
fn malformed_and_foreign_json() {
    let limits = Limits::default();
    for (doc, want_json_error) in [
        ("", true),
        ("{", true),
        ("{\"spdxVersion\": \"SPDX-2.3\", ", true),
        ("not json at all", true),
        ("{} trailing", true),
        ("{\"hello\": 1}", false),
        ("[1, 2, 3]", false),
        ("\"a string\"", false),
        ("{\"spdxVersion\": 23}", false),
        ("{\"spdxVersion\": \"SPDX-2.3\", \"packages\": \"nope\"}", false),
    ] {
        let err = parse_sbom(doc.as_bytes(), None, &limits).unwrap_err();
        if want_json_error {
            assert!(matches!(err, Error::Json { .. }), "{doc:?}: {err}");
        } else {
            assert!(matches!(err, Error::NotSbom { .. }), "{doc:?}: {err}");
        }
    }
    // A byte-order mark is tolerated.
    let with_bom = [b"\xEF\xBB\xBF".as_slice(), CDX_PY.as_bytes()].concat();
    assert!(parse_sbom(&with_bom, None, &limits).is_ok());
}

#[test]
fn inventories_serialize() {
    let inv = parse(CDX_PY);
    let json = serde_json::to_value(&inv).unwrap();
    assert_eq!(json["packages"][0]["source"], "cyclonedx");
    let back: Inventory = serde_json::from_value(json).unwrap();
    assert_eq!(back, inv);
    assert_eq!("npm".parse::<Source>().unwrap(), Source::Npm);
    assert_eq!(Source::CycloneDx.as_str(), "cyclonedx");
    assert!("rpm".parse::<Source>().is_err());
}
