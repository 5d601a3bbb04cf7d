//! Random and mutated input never panics; it parses or returns an error.

mod common;

use common::*;
use proptest::prelude::*;
use ward_sbom::{LayerScanner, Limits, Purl, parse_sbom};

fn small_limits() -> Limits {
    Limits {
        max_layer_bytes: 1 << 20,
        max_entries: 1000,
        max_file_bytes: 64 << 10,
        max_kept_bytes: 256 << 10,
        ..Limits::default()
    }
}

fn scan(bytes: &[u8], media_type: &str) {
    let mut s = LayerScanner::new(small_limits());
    if s.add_layer(bytes, media_type).is_ok() {
        let _ = s.finish();
    }
}

/// Valid inputs to mutate: mutations of real structure reach deeper code
/// than random bytes do.
fn documents() -> Vec<Vec<u8>> {
    vec![
        SPDX_SYFT.as_bytes().to_vec(),
        CDX_PY.as_bytes().to_vec(),
        envelope(&statement("https://spdx.dev/Document", DIGEST, SPDX_SYFT)).into_bytes(),
        statement("https://cyclonedx.org/bom", DIGEST, CDX_PY).into_bytes(),
    ]
}

fn layers() -> Vec<Vec<u8>> {
    let t = tar(&[
        Item::File("etc/os-release", b"ID=alpine\nVERSION_ID=3.19.1\n"),
        Item::File(
            "lib/apk/db/installed",
            b"P:musl\nV:1.2.4-r2\nA:x86_64\nL:MIT\no:musl\n\nP:zlib\nV:1.3.1-r0\n",
        ),
        Item::File(
            "var/lib/dpkg/status",
            b"Package: a\nStatus: install ok installed\nVersion: 1\nArchitecture: all\n",
        ),
        Item::File(
            "usr/lib/python3/site-packages/x-1.dist-info/METADATA",
            b"Name: x\nVersion: 1\n",
        ),
        Item::File(
            "app/node_modules/@s/n/package.json",
            br#"{"name":"@s/n","version":"1.0.0","license":"MIT"}"#,
        ),
        Item::File("app/node_modules/.wh.gone", b""),
    ]);
    vec![gzip(&t), zstd(&t), t]
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16)).prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
    ]
}

fn mutate(mut data: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        if data.is_empty() {
            break;
        }
        let len = data.len();
        match m {
            Mutation::Flip(i, b) => data[i % len] ^= b | 1,
            Mutation::Truncate(i) => data.truncate(i % len),
            Mutation::Insert(i, v) => {
                let at = i % len;
                data.splice(at..at, v.iter().copied());
            }
            Mutation::Delete(i, n) => {
                let at = i % len;
                let end = (at + n).min(len);
                data.drain(at..end);
            }
        }
    }
    data
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let _ = parse_sbom(&bytes, None, &Limits::default());
        let _ = parse_sbom(&bytes, Some("sha256:00"), &Limits::default());
        for media_type in [GZ, ZST, TAR, ""] {
            scan(&bytes, media_type);
        }
        if let Ok(s) = std::str::from_utf8(&bytes) {
            let _ = Purl::parse(s);
        }
    }

    #[test]
    fn mutated_documents(which in 0usize..4, mutations in proptest::collection::vec(mutation(), 1..6)) {
        let doc = mutate(documents()[which].clone(), &mutations);
        let _ = parse_sbom(&doc, Some(&format!("sha256:{DIGEST}")), &Limits::default());
    }

    #[test]
    fn mutated_layers(which in 0usize..3, mutations in proptest::collection::vec(mutation(), 1..6)) {
        let layer = mutate(layers()[which].clone(), &mutations);
        for media_type in [GZ, ZST, TAR] {
            scan(&layer, media_type);
        }
    }

    #[test]
    fn purls_round_trip(
        ty in "[a-z][a-z0-9.+-]{0,8}",
        ns in proptest::option::of("[^/]{1,12}(/[^/]{1,12}){0,2}"),
        name in ".{1,16}",
        version in proptest::option::of(".{1,16}"),
        qualifier in proptest::option::of(("[a-z][a-z0-9._-]{0,6}", ".{1,12}")),
    ) {
        if let Ok(mut p) = Purl::new(&ty, ns.as_deref(), &name, version.as_deref()) {
            if let Some((k, v)) = &qualifier {
                p = p.with_qualifier(k, v).unwrap();
            }
            let printed = p.to_string();
            prop_assert!(printed.is_ascii());
            let back = Purl::parse(&printed).unwrap();
            prop_assert_eq!(back.to_string(), printed);
        }
    }
}
