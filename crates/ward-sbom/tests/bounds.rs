//! Every bound in `Limits` stops hostile input with a clear error.

mod common;

use std::io::{self, Read, Write};

use common::*;
use ward_sbom::{Error, LayerScanner, Limits, parse_sbom};

fn scan_one(bytes: &[u8], media_type: &str, limits: Limits) -> Result<ward_sbom::Inventory, Error> {
    let mut s = LayerScanner::new(limits);
    s.add_layer(bytes, media_type)?;
    s.finish()
}

#[test]
fn document_size() {
    let limits = Limits {
        max_document_bytes: 1000,
        ..Limits::default()
    };
    let err = parse_sbom(CDX_PY.as_bytes(), None, &limits).unwrap_err();
    assert!(matches!(err, Error::DocumentTooLarge { limit: 1000, .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("SBOM is {} bytes, over the 1000-byte bound", CDX_PY.len())
    );
}

#[test]
fn deep_nesting_is_refused_before_parsing() {
    let limits = Limits::default();
    for doc in [
        "[".repeat(10_000),
        format!("{}{}", "{\"a\":".repeat(10_000), "1"),
        format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","components":{}}}"#,
            "[".repeat(100_000)
        ),
    ] {
        let err = parse_sbom(doc.as_bytes(), None, &limits).unwrap_err();
        assert!(
            matches!(
                err,
                Error::TooDeep {
                    what: "JSON",
                    limit: 64
                }
            ),
            "{err}"
        );
        assert_eq!(err.to_string(), "JSON nesting is over 64 levels");
    }
    // Inside a DSSE payload too.
    let deep = envelope(&"[".repeat(10_000));
    assert!(matches!(
        parse_sbom(deep.as_bytes(), None, &limits),
        Err(Error::TooDeep { .. })
    ));
}

#[test]
fn component_nesting() {
    // Nested components within the JSON bound but over a component bound:
    // reachable when max_depth is raised.
    let mut doc = String::from(r#"{"bomFormat":"CycloneDX","specVersion":"1.6","components":["#);
    for i in 0..20 {
        doc.push_str(&format!(
            r#"{{"name":"c{i}","version":"1","purl":"pkg:npm/c{i}@1","components":["#
        ));
    }
    doc.push_str(&"]}".repeat(20));
    doc.push_str("]}");
    let ok = parse_sbom(doc.as_bytes(), None, &Limits::default()).unwrap();
    assert_eq!(ok.packages.len(), 20);
    let limits = Limits {
        max_depth: 10,
        ..Limits::default()
    };
    let err = parse_sbom(doc.as_bytes(), None, &limits).unwrap_err();
    assert!(matches!(err, Error::TooDeep { .. }), "{err}");
}

#[test]
fn component_count() {
    let limits = Limits {
        max_components: 3,
        ..Limits::default()
    };
    let err = parse_sbom(CDX_PY.as_bytes(), None, &limits).unwrap_err();
    assert!(matches!(err, Error::TooManyComponents { limit: 3, .. }), "{err}");
    let err = parse_sbom(SPDX_SYFT.as_bytes(), None, &limits).unwrap_err();
    assert!(matches!(err, Error::TooManyComponents { limit: 3, .. }), "{err}");
    assert!(err.to_string().contains("over 3 packages"), "{err}");

    let db: String = (0..5).map(|i| format!("P:p{i}\nV:1\n\n")).collect();
    let layer = tar(&[Item::File("lib/apk/db/installed", db.as_bytes())]);
    let err = scan_one(&layer, TAR, limits).unwrap_err();
    assert!(matches!(err, Error::TooManyComponents { limit: 3, .. }), "{err}");
}

#[test]
fn field_length() {
    let limits = Limits::default();
    let long = "x".repeat(5000);
    let doc = SPDX_SYFT.replace("\"name\": \"busybox\"", &format!("\"name\": \"{long}\""));
    let err = parse_sbom(doc.as_bytes(), None, &limits).unwrap_err();
    assert!(
        matches!(
            err,
            Error::FieldTooLong {
                field: "package name",
                len: 5000,
                limit: 4096,
                ..
            }
        ),
        "{err}"
    );

    let doc = CDX_PY.replace("\"version\": \"2.1.0\"", &format!("\"version\": \"{long}\""));
    let err = parse_sbom(doc.as_bytes(), None, &limits).unwrap_err();
    assert!(
        matches!(
            err,
            Error::FieldTooLong {
                field: "package version",
                ..
            }
        ),
        "{err}"
    );

    let db = format!("P:{long}\nV:1\n");
    let layer = tar(&[Item::File("lib/apk/db/installed", db.as_bytes())]);
    let err = scan_one(&layer, TAR, limits).unwrap_err();
    assert_eq!(
        err.to_string(),
        "package name in /lib/apk/db/installed is 5000 bytes, over the 4096-byte bound"
    );

    // A Python License header that is a whole license text is dropped, not fatal.
    let meta = format!("Name: pkg\nVersion: 1\nLicense: {long}\n");
    let layer = tar(&[Item::File(
        "usr/lib/python3/site-packages/pkg-1.dist-info/METADATA",
        meta.as_bytes(),
    )]);
    let inv = scan_one(&layer, TAR, limits).unwrap();
    assert_eq!(inv.packages[0].license, None);
}

#[test]
fn gzip_bomb() {
    // 64 MiB of zeros inside one tar entry, compressed to about 64 KiB.
    const SIZE: u64 = 64 << 20;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut h = tar::Header::new_gnu();
    h.set_path("zeros").unwrap();
    h.set_size(SIZE);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    enc.write_all(h.as_bytes()).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..SIZE >> 20 {
        enc.write_all(&zeros).unwrap();
    }
    let bomb = enc.finish().unwrap();
    assert!(bomb.len() < 1 << 20);

    let limits = Limits {
        max_layer_bytes: 1 << 20,
        ..Limits::default()
    };
    let mut consumed = Consumed(&bomb, 0);
    let mut s = LayerScanner::new(limits);
    let err = s.add_layer(&mut consumed, GZ).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LayerTooLarge {
                layer: 0,
                limit: 1048576
            }
        ),
        "{err}"
    );
    assert_eq!(err.to_string(), "layer 0 decompresses past 1048576 bytes");
    // Decompression stopped at the bound rather than inflating everything.
    assert!(
        consumed.1 < bomb.len() / 4,
        "read {} of {} bytes",
        consumed.1,
        bomb.len()
    );
}

/// A reader that counts how much of its input was asked for.
struct Consumed<'a>(&'a [u8], usize);

impl Read for Consumed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0[self.1..].len().min(buf.len()).min(4096);
        buf[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
        self.1 += n;
        Ok(n)
    }
}

#[test]
fn zstd_layer_over_the_bound() {
    // Incompressible bytes, so that how much input was read tells whether
    // decoding stopped at the bound.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let data: Vec<u8> = (0..4 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut h = tar::Header::new_gnu();
    h.set_path("zeros").unwrap();
    h.set_size(data.len() as u64);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let layer = [h.as_bytes().as_slice(), &data].concat();
    let bomb = zstd(&layer);
    let limits = Limits {
        max_layer_bytes: 1 << 20,
        ..Limits::default()
    };
    let mut consumed = Consumed(&bomb, 0);
    let mut s = LayerScanner::new(limits);
    let err = s.add_layer(&mut consumed, ZST).unwrap_err();
    assert!(matches!(err, Error::LayerTooLarge { .. }), "{err}");
    assert!(
        consumed.1 < bomb.len() / 2,
        "read {} of {} bytes",
        consumed.1,
        bomb.len()
    );
}

#[test]
fn path_length() {
    let long = format!("{}/file", "a".repeat(5000));
    let layer = tar(&[Item::File(&long, b"x")]);
    let err = scan_one(&layer, TAR, Limits::default()).unwrap_err();
    assert!(matches!(err, Error::PathTooLong { limit: 4096, .. }), "{err}");
    assert!(err.to_string().starts_with("tar entry path over 4096 bytes"), "{err}");

    let mut b = tar::Builder::new(Vec::new());
    b.append_pax_extensions([("path", long.as_bytes())]).unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_path("short").unwrap();
    h.set_size(0);
    h.set_cksum();
    b.append(&h, io::empty()).unwrap();
    let err = scan_one(&b.into_inner().unwrap(), TAR, Limits::default()).unwrap_err();
    assert!(matches!(err, Error::PathTooLong { .. }), "{err}");
}

#[test]
fn entry_count() {
    let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
    let items: Vec<Item> = names.iter().map(|n| Item::File(n, b"")).collect();
    let layer = tar(&items);
    let limits = Limits {
        max_entries: 10,
        ..Limits::default()
    };
    let err = scan_one(&layer, TAR, limits).unwrap_err();
    assert!(matches!(err, Error::TooManyEntries { limit: 10, .. }), "{err}");
    assert!(scan_one(&layer, TAR, Limits::default()).is_ok());
}

#[test]
fn metadata_file_size_and_total() {
    let db = "P:a\nV:1\n\n".repeat(30);
    let layer = tar(&[Item::File("lib/apk/db/installed", db.as_bytes())]);
    let limits = Limits {
        max_file_bytes: 100,
        ..Limits::default()
    };
    let err = scan_one(&layer, TAR, limits).unwrap_err();
    assert!(
        matches!(
            err,
            Error::FileTooLarge {
                size: 270,
                limit: 100,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("/lib/apk/db/installed in layer 0 is 270 bytes"),
        "{err}"
    );

    // The total bound counts what is held, not what passed: a replaced
    // file frees its share.
    let limits = Limits {
        max_kept_bytes: 400,
        ..Limits::default()
    };
    let mut s = LayerScanner::new(limits);
    for _ in 0..5 {
        s.add_layer(layer.as_slice(), TAR).unwrap();
    }
    let two = tar(&[
        Item::File("lib/apk/db/installed", db.as_bytes()),
        Item::File("var/lib/dpkg/status", db.as_bytes()),
    ]);
    let err = s.add_layer(two.as_slice(), TAR).unwrap_err();
    assert!(matches!(err, Error::KeptTooLarge { limit: 400 }), "{err}");
}

#[test]
fn malformed_layers() {
    let layer = tar(&[Item::File("lib/apk/db/installed", b"P:a\nV:1\n")]);
    let gz = gzip(&layer);
    let limits = Limits::default();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated gzip", gz[..gz.len() / 2].to_vec(), GZ),
        ("gzip declared, garbage given", b"definitely not gzip".to_vec(), GZ),
        ("zstd declared, garbage given", b"definitely not zstd".to_vec(), ZST),
        ("truncated zstd", zstd(&layer)[..20].to_vec(), ZST),
        ("garbage tar", vec![0x55; 2048], TAR),
        ("short tar", vec![0x41; 100], TAR),
        ("truncated tar", layer[..700].to_vec(), TAR),
    ];
    for (what, bytes, media_type) in cases {
        let err = scan_one(&bytes, media_type, limits).unwrap_err();
        assert!(matches!(err, Error::MalformedLayer { layer: 0, .. }), "{what}: {err}");
    }
    let xz = [&[0xfd, b'7', b'z', b'X', b'Z', 0][..], &[0; 100]].concat();
    let err = scan_one(&xz, "application/vnd.oci.image.layer.v1.tar+xz", limits).unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedCompression { compression: "xz", .. }),
        "{err}"
    );
}

#[test]
fn reader_failures_are_io_errors() {
    struct Failing(usize);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::new(io::ErrorKind::ConnectionReset, "blob store went away"));
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(0x1f);
            self.0 -= n;
            Ok(n)
        }
    }
    for media_type in [TAR, GZ, ""] {
        let mut s = LayerScanner::new(Limits::default());
        let err = s.add_layer(Failing(0), media_type).unwrap_err();
        assert!(matches!(err, Error::Io { layer: 0, .. }), "{media_type}: {err}");
    }
    // Layer numbers count from the bottom.
    let mut s = LayerScanner::new(Limits::default());
    s.add_layer(tar(&[]).as_slice(), TAR).unwrap();
    let err = s.add_layer(Failing(0), TAR).unwrap_err();
    assert!(matches!(err, Error::Io { layer: 1, .. }), "{err}");
}

#[test]
fn extreme_limits_do_not_overflow() {
    let limits = Limits {
        max_document_bytes: usize::MAX,
        max_components: usize::MAX,
        max_depth: usize::MAX,
        max_layer_bytes: u64::MAX,
        max_entries: u64::MAX,
        max_path_bytes: usize::MAX,
        max_file_bytes: u64::MAX,
        max_kept_bytes: u64::MAX,
        max_field_bytes: usize::MAX,
    };
    let long = format!("{}/node_modules/x/package.json", "l".repeat(300));
    let layer = tar(&[
        Item::File("lib/apk/db/installed", b"P:a\nV:1\n"),
        Item::File(&long, br#"{"name":"x","version":"1"}"#),
    ]);
    assert_eq!(scan_one(&gzip(&layer), GZ, limits).unwrap().packages.len(), 2);
    // serde_json's own recursion limit still stands behind an unbounded max_depth.
    let err = parse_sbom("[".repeat(10_000).as_bytes(), None, &limits).unwrap_err();
    assert!(matches!(err, Error::Json { .. } | Error::NotSbom { .. }), "{err}");
    assert!(parse_sbom(CDX_PY.as_bytes(), None, &limits).is_ok());

    let zero = Limits {
        max_document_bytes: 0,
        max_components: 0,
        max_depth: 0,
        max_layer_bytes: 0,
        max_entries: 0,
        max_path_bytes: 0,
        max_file_bytes: 0,
        max_kept_bytes: 0,
        max_field_bytes: 0,
    };
    assert!(parse_sbom(b"{}", None, &zero).is_err());
    assert!(scan_one(&layer, TAR, zero).is_err());
}
