//! Builders for test layers and documents.
#![allow(dead_code)]

use std::io::Write;

use base64::Engine as _;

pub enum Item<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
}

/// A tar archive of `items`, with GNU headers (long paths get GNU long-name
/// entries, as docker's and most builders' do).
pub fn tar(items: &[Item]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for item in items {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_mtime(1_700_000_000);
        match item {
            Item::File(path, data) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(data.len() as u64);
                b.append_data(&mut h, path, *data).unwrap();
            }
            Item::Dir(path) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, path, &[][..]).unwrap();
            }
            Item::Symlink(path, target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, path, target).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

pub const GZ: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const ZST: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
pub const TAR: &str = "application/vnd.oci.image.layer.v1.tar";
pub const DOCKER_GZ: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";

pub fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

pub const DIGEST: &str = "4a2a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f40";
pub const OTHER_DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000001";

/// An SPDX 2.3 document shaped like syft's output for a small image.
pub const SPDX_SYFT: &str = r#"{
  "spdxVersion": "SPDX-2.3",
  "dataLicense": "CC0-1.0",
  "SPDXID": "SPDXRef-DOCUMENT",
  "name": "registry.example.com/team/app",
  "documentNamespace": "https://anchore.com/syft/image/registry.example.com/team/app-6f0c5c1e-2f7c-4b8e-9d3a-1f2e3d4c5b6a",
  "creationInfo": {
    "licenseListVersion": "3.22",
    "creators": ["Organization: Anchore, Inc", "Tool: syft-0.100.0"],
    "created": "2024-01-15T10:20:30Z"
  },
  "packages": [
    {
      "name": "busybox",
      "SPDXID": "SPDXRef-Package-apk-busybox-5b8e1a2c3d4e5f60",
      "versionInfo": "1.36.1-r5",
      "supplier": "Person: Wolfi",
      "originator": "Person: Wolfi",
      "downloadLocation": "NONE",
      "filesAnalyzed": false,
      "sourceInfo": "acquired package info from APK DB: /lib/apk/db/installed",
      "licenseConcluded": "NOASSERTION",
      "licenseDeclared": "GPL-2.0-only",
      "copyrightText": "NOASSERTION",
      "externalRefs": [
        {"referenceCategory": "SECURITY", "referenceType": "cpe23Type", "referenceLocator": "cpe:2.3:a:busybox:busybox:1.36.1-r5:*:*:*:*:*:*:*"},
        {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": "pkg:apk/wolfi/busybox@1.36.1-r5?arch=x86_64&distro=wolfi-20230201"}
      ]
    },
    {
      "name": "libc6",
      "SPDXID": "SPDXRef-Package-deb-libc6-0a1b2c3d4e5f6071",
      "versionInfo": "2.36-9+deb12u4",
      "downloadLocation": "NOASSERTION",
      "licenseConcluded": "NOASSERTION",
      "licenseDeclared": "NOASSERTION",
      "externalRefs": [
        {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": "pkg:deb/debian/libc6@2.36-9+deb12u4?distro=debian-12&arch=amd64&upstream=glibc"}
      ]
    },
    {
      "name": "requests",
      "SPDXID": "SPDXRef-Package-python-requests-1122334455667788",
      "versionInfo": "2.31.0",
      "downloadLocation": "NOASSERTION",
      "licenseConcluded": "Apache-2.0",
      "licenseDeclared": "Apache-2.0",
      "externalRefs": [
        {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": "pkg:pypi/requests@2.31.0"}
      ]
    },
    {
      "name": "requests",
      "SPDXID": "SPDXRef-Package-python-requests-99aabbccddeeff00",
      "versionInfo": "2.31.0",
      "downloadLocation": "NOASSERTION",
      "licenseConcluded": "NOASSERTION",
      "externalRefs": [
        {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": "pkg:pypi/requests@2.31.0"}
      ]
    },
    {
      "name": "Django_Rest_Framework",
      "SPDXID": "SPDXRef-Package-python-drf",
      "versionInfo": "3.14.0",
      "downloadLocation": "NOASSERTION",
      "externalRefs": [
        {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": "pkg:pypi/Django_Rest_Framework@3.14.0"}
      ]
    },
    {
      "name": "vendored-blob",
      "SPDXID": "SPDXRef-Package-binary-vendored",
      "versionInfo": "1.0",
      "downloadLocation": "NOASSERTION"
    },
    {
      "name": "registry.example.com/team/app",
      "SPDXID": "SPDXRef-DocumentRoot-Image-registry.example.com-team-app",
      "versionInfo": "sha256:4a2a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f40",
      "supplier": "NOASSERTION",
      "downloadLocation": "NOASSERTION",
      "primaryPackagePurpose": "CONTAINER"
    }
  ],
  "files": [
    {"fileName": "/lib/apk/db/installed", "SPDXID": "SPDXRef-File-lib-apk-db-installed-1", "checksums": [{"algorithm": "SHA1", "checksumValue": "0000000000000000000000000000000000000000"}], "licenseConcluded": "NOASSERTION", "copyrightText": ""}
  ],
  "relationships": [
    {"spdxElementId": "SPDXRef-Package-apk-busybox-5b8e1a2c3d4e5f60", "relatedSpdxElement": "SPDXRef-File-lib-apk-db-installed-1", "relationshipType": "CONTAINS"},
    {"spdxElementId": "SPDXRef-DOCUMENT", "relatedSpdxElement": "SPDXRef-DocumentRoot-Image-registry.example.com-team-app", "relationshipType": "DESCRIBES"}
  ]
}"#;

/// A CycloneDX 1.5 BOM shaped like cyclonedx-py's (`cyclonedx-py environment`).
pub const CDX_PY: &str = r#"{
  "$schema": "http://cyclonedx.org/schema/bom-1.5.schema.json",
  "bomFormat": "CycloneDX",
  "specVersion": "1.5",
  "serialNumber": "urn:uuid:3e671687-395b-41f5-a30f-a58921a69b79",
  "version": 1,
  "metadata": {
    "timestamp": "2024-02-01T12:00:00.123456+00:00",
    "tools": {
      "components": [
        {"type": "application", "group": "CycloneDX", "name": "cyclonedx-py", "version": "4.2.3",
         "description": "CycloneDX Software Bill of Materials (SBOM) generator for Python projects and environments",
         "licenses": [{"license": {"id": "Apache-2.0"}}],
         "externalReferences": [{"type": "vcs", "url": "https://github.com/CycloneDX/cyclonedx-python"}]},
        {"type": "library", "group": "CycloneDX", "name": "cyclonedx-python-lib", "version": "6.4.4"}
      ]
    },
    "component": {"bom-ref": "root-component", "type": "application", "name": "myapp", "version": "0.1.0",
                  "description": "the app", "purl": "pkg:pypi/myapp@0.1.0"}
  },
  "components": [
    {"bom-ref": "requests==2.31.0", "type": "library", "name": "requests", "version": "2.31.0",
     "description": "Python HTTP for Humans.",
     "licenses": [{"license": {"id": "Apache-2.0"}}],
     "purl": "pkg:pypi/requests@2.31.0",
     "externalReferences": [{"type": "website", "url": "https://requests.readthedocs.io"}]},
    {"bom-ref": "urllib3==2.1.0", "type": "library", "name": "urllib3", "version": "2.1.0",
     "licenses": [{"expression": "MIT"}], "purl": "pkg:pypi/urllib3@2.1.0"},
    {"bom-ref": "charset-normalizer==3.3.2", "type": "library", "name": "charset-normalizer", "version": "3.3.2",
     "licenses": [{"license": {"name": "MIT License"}}], "purl": "pkg:pypi/charset-normalizer@3.3.2"},
    {"bom-ref": "Typing_Extensions==4.9.0", "type": "library", "name": "Typing_Extensions", "version": "4.9.0",
     "purl": "pkg:pypi/typing-extensions@4.9.0"},
    {"bom-ref": "local-thing", "type": "library", "name": "local-thing", "version": "0.0.1"},
    {"bom-ref": "readme", "type": "file", "name": "README.md"}
  ],
  "dependencies": [
    {"ref": "root-component", "dependsOn": ["requests==2.31.0"]},
    {"ref": "requests==2.31.0", "dependsOn": ["urllib3==2.1.0", "charset-normalizer==3.3.2"]}
  ]
}"#;

/// An in-toto statement about `digest` with `predicate` (JSON text).
pub fn statement(predicate_type: &str, digest: &str, predicate: &str) -> String {
    format!(
        r#"{{"_type":"https://in-toto.io/Statement/v0.1","predicateType":"{predicate_type}","subject":[{{"name":"registry.example.com/team/app","digest":{{"sha256":"{digest}"}}}}],"predicate":{predicate}}}"#
    )
}

/// A DSSE envelope around `payload`, as cosign attest writes it.
pub fn envelope(payload: &str) -> String {
    format!(
        r#"{{"payloadType":"application/vnd.in-toto+json","payload":"{}","signatures":[{{"keyid":"","sig":"MEUCIQDx0yZl9m2yq1cVnq3b0nQe5gkG3dS0Wl5iX0A6c1k7QwIgVvGZ0cO2o3wC9qWkqkS0jv0bL1Q2v1x8m9mZ0cH1b2c="}}]}}"#,
        b64(payload.as_bytes())
    )
}
