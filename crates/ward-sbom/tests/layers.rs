//! Image layers: package databases, language metadata, whiteouts, compression.

mod common;

use common::*;
use ward_sbom::{Error, Inventory, LayerScanner, Limits, Source};

const WOLFI_OS_RELEASE: &[u8] =
    b"ID=wolfi\nNAME=\"Wolfi\"\nPRETTY_NAME=\"Wolfi\"\nVERSION_ID=\"20230201\"\nHOME_URL=\"https://wolfi.dev\"\n";

const APK_DB: &[u8] = b"C:Q1abcdefghijklmnopqrstuvwxyz012=
P:busybox
V:1.36.1-r5
A:x86_64
S:507264
I:946176
T:Size optimized toolbox of many common UNIX utilities
U:https://busybox.net
L:GPL-2.0-only
o:busybox
m:Wolfi
t:1700000000
c:0123456789abcdef0123456789abcdef01234567
D:so:libc.so.6
p:cmd:busybox=1.36.1-r5
F:bin
R:busybox
a:0:0:755
Z:Q1zyxwvutsrqponmlkjihgfedcba987=

C:Q1aaaaaaaaaaaaaaaaaaaaaaaaaaaaa=
P:libcrypto3
V:3.2.0-r1
A:x86_64
L:Apache-2.0
o:openssl
F:usr/lib
R:libcrypto.so.3

P:broken-no-version
A:x86_64
";

fn metadata(name: &str, version: &str, license: &str) -> Vec<u8> {
    format!(
        "Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: A package\nLicense: {license}\n        continued license text that is not the license name\nClassifier: Programming Language :: Python :: 3\n\nName: NotThis\nLong description body.\n"
    )
    .into_bytes()
}

fn package_json(name: &str, version: &str, license: &str) -> Vec<u8> {
    format!(
        r#"{{"name":"{name}","version":"{version}","license":{license},"main":"index.js","dependencies":{{"x":"^1"}}}}"#
    )
    .into_bytes()
}

fn scan(layers: &[(Vec<u8>, &str)]) -> Result<Inventory, Error> {
    let mut s = LayerScanner::new(Limits::default());
    for (bytes, media_type) in layers {
        s.add_layer(bytes.as_slice(), media_type)?;
    }
    s.finish()
}

fn purls(inv: &Inventory) -> Vec<&str> {
    inv.packages.iter().map(|p| p.purl.as_str()).collect()
}

#[test]
fn wolfi_image_across_two_layers_with_whiteouts() {
    let requests = metadata("requests", "2.31.0", "Apache 2.0");
    let six = metadata("six", "1.16.0", "MIT");
    let express = package_json("express", "4.18.2", r#""MIT""#);
    let types_node = package_json("@types/node", "20.10.0", r#"{"type":"MIT"}"#);
    let left_pad = package_json("left-pad", "1.3.0", r#""WTFPL""#);
    let not_a_package = package_json("express-internal", "0.0.0", r#""MIT""#);
    let base = tar(&[
        Item::Dir("./"),
        Item::Dir("./etc/"),
        Item::File("./etc/os-release", WOLFI_OS_RELEASE),
        Item::File("./lib/apk/db/installed", APK_DB),
        Item::File(
            "./usr/lib/python3.12/site-packages/requests-2.31.0.dist-info/METADATA",
            &requests,
        ),
        Item::File("./usr/lib/python3.12/site-packages/six-1.16.0.dist-info/METADATA", &six),
        Item::File(
            "./usr/lib/python3.12/site-packages/six-1.16.0.dist-info/RECORD",
            b"six.py,,\n",
        ),
        Item::File("app/node_modules/express/package.json", &express),
        Item::File("app/node_modules/express/lib/package.json", &not_a_package),
        Item::File("app/node_modules/@types/node/package.json", &types_node),
        Item::File("app/node_modules/left-pad/package.json", &left_pad),
        Item::File("usr/bin/busybox", &[0x7f, b'E', b'L', b'F']),
    ]);
    let attrs = b"Metadata-Version: 1.1\nName: attrs\nVersion: 23.1.0\nLicense: MIT\n";
    let upper = tar(&[
        // Whiteout of a directory (removes its METADATA), an opaque directory,
        // and a whiteout of one package directory.
        Item::File("usr/lib/python3.12/site-packages/.wh.six-1.16.0.dist-info", b""),
        Item::Dir("app/node_modules/@types/"),
        Item::File("app/node_modules/@types/.wh..wh..opq", b""),
        Item::File("app/node_modules/.wh.left-pad", b""),
        Item::File("usr/lib/python3.12/site-packages/attrs-23.1.0.egg-info/PKG-INFO", attrs),
    ]);
    let inv = scan(&[(gzip(&base), GZ), (zstd(&upper), ZST)]).unwrap();
    assert_eq!(inv.format, None);
    assert_eq!(
        purls(&inv),
        [
            "pkg:apk/wolfi/busybox@1.36.1-r5?arch=x86_64&distro=wolfi-20230201",
            "pkg:apk/wolfi/libcrypto3@3.2.0-r1?arch=x86_64&distro=wolfi-20230201&upstream=openssl",
            "pkg:npm/express@4.18.2",
            "pkg:pypi/attrs@23.1.0",
            "pkg:pypi/requests@2.31.0",
        ]
    );
    assert_eq!(inv.skipped, 1, "the apk stanza without a version");

    let busybox = &inv.packages[0];
    assert_eq!(busybox.source, Source::Apk);
    assert_eq!(busybox.namespace.as_deref(), Some("wolfi"));
    assert_eq!(busybox.license.as_deref(), Some("GPL-2.0-only"));
    assert_eq!(busybox.location.as_deref(), Some("/lib/apk/db/installed"));
    let express = &inv.packages[2];
    assert_eq!(express.source, Source::Npm);
    assert_eq!(
        express.location.as_deref(),
        Some("/app/node_modules/express/package.json")
    );
    let requests = &inv.packages[4];
    assert_eq!(requests.license.as_deref(), Some("Apache 2.0"));
    assert_eq!(requests.source, Source::Python);
    assert_eq!(
        inv.packages[3].location.as_deref(),
        Some("/usr/lib/python3.12/site-packages/attrs-23.1.0.egg-info/PKG-INFO")
    );

    // Without the upper layer, everything whited out is there.
    let inv = scan(&[(gzip(&base), GZ)]).unwrap();
    let all = purls(&inv);
    assert!(all.contains(&"pkg:npm/%40types/node@20.10.0"), "{all:?}");
    assert!(all.contains(&"pkg:npm/left-pad@1.3.0"), "{all:?}");
    assert!(all.contains(&"pkg:pypi/six@1.16.0"), "{all:?}");
    assert!(!all.iter().any(|p| p.contains("express-internal")), "{all:?}");
    let node = inv.packages.iter().find(|p| p.name == "@types/node").unwrap();
    assert_eq!(node.namespace.as_deref(), Some("@types"));
    assert_eq!(node.license.as_deref(), Some("MIT"));
}

#[test]
fn opaque_whiteout_spares_the_same_layer() {
    let old = package_json("old", "1.0.0", r#""MIT""#);
    let new = package_json("new", "2.0.0", r#""MIT""#);
    let lower = tar(&[Item::File("srv/node_modules/old/package.json", &old)]);
    // The new content precedes the opaque marker in the same layer.
    let upper = tar(&[
        Item::File("srv/node_modules/new/package.json", &new),
        Item::File("srv/node_modules/.wh..wh..opq", b""),
    ]);
    let inv = scan(&[(lower, TAR), (upper, TAR)]).unwrap();
    assert_eq!(purls(&inv), ["pkg:npm/new@2.0.0"]);
}

#[test]
fn replaced_and_deleted_files() {
    let db1 = b"P:zlib\nV:1.3-r0\nA:aarch64\n";
    let db2 = b"P:zlib\nV:1.3.1-r0\nA:aarch64\n";
    let l1 = tar(&[Item::File("lib/apk/db/installed", db1)]);
    let l2 = tar(&[Item::File("lib/apk/db/installed", db2)]);
    let inv = scan(&[(l1.clone(), TAR), (l2, TAR)]).unwrap();
    // No os-release: the namespace defaults to alpine, and there is no distro.
    assert_eq!(purls(&inv), ["pkg:apk/alpine/zlib@1.3.1-r0?arch=aarch64"]);

    let gone = tar(&[Item::File("lib/apk/db/.wh.installed", b"")]);
    assert!(scan(&[(l1.clone(), TAR), (gone, TAR)]).unwrap().packages.is_empty());

    // Replacing the whole directory with a symlink drops what was below it.
    let swapped = tar(&[Item::Symlink("lib/apk", "/elsewhere")]);
    assert!(scan(&[(l1.clone(), TAR), (swapped, TAR)]).unwrap().packages.is_empty());

    // Whiteout at the root of the image, and of a parent directory.
    let root = tar(&[Item::File(".wh..wh..opq", b"")]);
    assert!(scan(&[(l1.clone(), TAR), (root, TAR)]).unwrap().packages.is_empty());
    let parent = tar(&[Item::File("lib/.wh.apk", b"")]);
    assert!(scan(&[(l1, TAR), (parent, TAR)]).unwrap().packages.is_empty());
}

#[test]
fn debian_status_and_distroless_status_d() {
    let os_release = b"PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nVERSION_CODENAME=bookworm\nID=debian\n";
    let status = b"Package: libc6
Status: install ok installed
Priority: optional
Section: libs
Installed-Size: 12986
Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>
Architecture: amd64
Multi-Arch: same
Source: glibc
Version: 2.36-9+deb12u4
Depends: libgcc-s1
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.
 .
 Package: not-a-field

Package: oldpkg
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0-1

Package: perl-base
Status: hold ok installed
Architecture: amd64
Source: perl (5.36.0-7)
Version: 5.36.0-7+deb12u1

Package: login
Status: install ok installed
Architecture: amd64
Source: shadow
Version: 1:4.13+dfsg1-1+b1
";
    let tzdata = b"Package: tzdata\nVersion: 2024a-0+deb12u1\nArchitecture: all\nMaintainer: GNU Libc Maintainers\nDescription: time zone and daylight-saving time data\n";
    let md5 = b"0123456789abcdef0123456789abcdef  usr/share/zoneinfo/UTC\n";
    let layer = tar(&[
        Item::Symlink("etc/os-release", "../usr/lib/os-release"),
        Item::File("usr/lib/os-release", os_release),
        Item::File("var/lib/dpkg/status", status),
        Item::File("var/lib/dpkg/status.d/tzdata", tzdata),
        Item::File("var/lib/dpkg/status.d/tzdata.md5sums", md5),
    ]);
    let inv = scan(&[(gzip(&layer), DOCKER_GZ)]).unwrap();
    assert_eq!(
        purls(&inv),
        [
            "pkg:deb/debian/libc6@2.36-9%2Bdeb12u4?arch=amd64&distro=debian-12&upstream=glibc",
            "pkg:deb/debian/login@1:4.13%2Bdfsg1-1%2Bb1?arch=amd64&distro=debian-12&upstream=shadow",
            "pkg:deb/debian/perl-base@5.36.0-7%2Bdeb12u1?arch=amd64&distro=debian-12&upstream=perl",
            "pkg:deb/debian/tzdata@2024a-0%2Bdeb12u1?arch=all&distro=debian-12",
        ]
    );
    assert_eq!(inv.skipped, 0);
    let login = &inv.packages[1];
    assert_eq!(login.version, "1:4.13+dfsg1-1+b1");
    assert_eq!(login.source, Source::Dpkg);
    assert_eq!(login.location.as_deref(), Some("/var/lib/dpkg/status"));
    assert_eq!(
        inv.packages[3].location.as_deref(),
        Some("/var/lib/dpkg/status.d/tzdata")
    );
    // The purl round-trips through the parser.
    for p in &inv.packages {
        assert_eq!(ward_sbom::canonical_purl(&p.purl).unwrap(), p.purl);
    }
}

#[test]
fn ubuntu_namespace_from_etc_os_release() {
    let layer = tar(&[
        Item::File(
            "etc/os-release",
            b"NAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\nID=ubuntu\nID_LIKE=debian\n",
        ),
        Item::File(
            "var/lib/dpkg/status",
            b"Package: bash\nStatus: install ok installed\nArchitecture: arm64\nVersion: 5.1-6ubuntu1.1\n",
        ),
    ]);
    let inv = scan(&[(layer, TAR)]).unwrap();
    assert_eq!(
        purls(&inv),
        ["pkg:deb/ubuntu/bash@5.1-6ubuntu1.1?arch=arm64&distro=ubuntu-22.04"]
    );
    assert_eq!(inv.packages[0].namespace.as_deref(), Some("ubuntu"));
}

#[test]
fn python_egg_info_file_and_dist_packages() {
    let layer = tar(&[
        Item::File("usr/lib/python3/dist-packages/PyYAML-6.0.1.dist-info/METADATA", &metadata("PyYAML", "6.0.1", "MIT")),
        Item::File("usr/lib/python3/dist-packages/zope.interface-5.5.2.egg-info", b"Metadata-Version: 1.2\nName: zope.interface\nVersion: 5.5.2\nLicense: ZPL 2.1\n"),
        Item::File("usr/lib/python3/dist-packages/typing_extensions-4.9.0.dist-info/METADATA", b"Metadata-Version: 2.4\nName: typing_extensions\nVersion: 4.9.0\nLicense-Expression: PSF-2.0\nLicense: UNKNOWN\n"),
        Item::File("usr/lib/python3/dist-packages/nameless-1.dist-info/METADATA", b"Metadata-Version: 2.1\nVersion: 1\n"),
    ]);
    let inv = scan(&[(gzip(&layer), "application/octet-stream")]).unwrap();
    let got: Vec<(&str, &str, Option<&str>)> = inv
        .packages
        .iter()
        .map(|p| (p.purl.as_str(), p.name.as_str(), p.license.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("pkg:pypi/pyyaml@6.0.1", "PyYAML", Some("MIT")),
            ("pkg:pypi/typing-extensions@4.9.0", "typing_extensions", Some("PSF-2.0")),
            ("pkg:pypi/zope-interface@5.5.2", "zope.interface", Some("ZPL 2.1")),
        ]
    );
    assert_eq!(inv.skipped, 1);
}

#[test]
fn npm_odd_manifests_are_skipped_not_fatal() {
    let layer = tar(&[
        Item::File(
            "app/node_modules/ok/package.json",
            &package_json("ok", "1.0.0", r#"null"#),
        ),
        Item::File("app/node_modules/broken/package.json", b"{not json"),
        Item::File("app/node_modules/noversion/package.json", br#"{"name":"noversion"}"#),
        Item::File(
            "app/node_modules/legacy/package.json",
            br#"{"name":"legacy","version":"0.1.0","licenses":[{"type":"MIT"},{"type":"Apache-2.0"}]}"#,
        ),
        Item::File("app/node_modules/deep/package.json", "[".repeat(500).as_bytes()),
    ]);
    let inv = scan(&[(layer, TAR)]).unwrap();
    assert_eq!(purls(&inv), ["pkg:npm/legacy@0.1.0", "pkg:npm/ok@1.0.0"]);
    assert_eq!(inv.packages[0].license.as_deref(), Some("MIT OR Apache-2.0"));
    assert_eq!(inv.packages[1].license, None);
    assert_eq!(inv.skipped, 3);
}

#[test]
fn compression_is_sniffed_when_the_media_type_does_not_say() {
    let layer = tar(&[Item::File("lib/apk/db/installed", b"P:musl\nV:1.2.4-r2\nA:x86_64\n")]);
    for bytes in [layer.clone(), gzip(&layer), zstd(&layer)] {
        for media_type in [TAR, "", "application/vnd.oci.image.layer.v1.tar+foo"] {
            let inv = scan(&[(bytes.clone(), media_type)]).unwrap();
            assert_eq!(
                purls(&inv),
                ["pkg:apk/alpine/musl@1.2.4-r2?arch=x86_64"],
                "{media_type}"
            );
        }
    }
    // Several zstd frames, with a skippable frame between, as zstd:chunked writes.
    let (a, b) = layer.split_at(700);
    let mut multi = zstd(a);
    multi.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 9, 9, 9]);
    multi.extend_from_slice(&zstd(b));
    assert_eq!(scan(&[(multi.clone(), ZST)]).unwrap().packages.len(), 1);
    assert_eq!(scan(&[(multi, "")]).unwrap().packages.len(), 1);
    // Several gzip members.
    let (a, b) = layer.split_at(1000);
    let multi = [gzip(a), gzip(b)].concat();
    assert_eq!(scan(&[(multi, GZ)]).unwrap().packages.len(), 1);
}

#[test]
fn long_paths_by_gnu_and_pax_headers() {
    // A metadata path over 100 bytes needs a GNU long name (tar's builder
    // emits one) or a PAX path.
    let deep = format!("opt/{}/node_modules/long/package.json", "d".repeat(150));
    let json = package_json("long", "1.0.0", r#""MIT""#);
    let layer = tar(&[Item::File(&deep, &json)]);
    assert_eq!(purls(&scan(&[(layer, TAR)]).unwrap()), ["pkg:npm/long@1.0.0"]);

    let mut b = tar::Builder::new(Vec::new());
    let pax_path = format!("srv/{}/node_modules/paxed/package.json", "p".repeat(200));
    b.append_pax_extensions([("path", pax_path.as_bytes()), ("mtime", b"1700000000.5".as_slice())])
        .unwrap();
    let json = package_json("paxed", "2.0.0", r#""MIT""#);
    let mut h = tar::Header::new_ustar();
    h.set_path("short-name").unwrap();
    h.set_size(json.len() as u64);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    b.append(&h, json.as_slice()).unwrap();
    let layer = b.into_inner().unwrap();
    let inv = scan(&[(layer, TAR)]).unwrap();
    assert_eq!(purls(&inv), ["pkg:npm/paxed@2.0.0"]);
    assert_eq!(
        inv.packages[0].location.as_deref(),
        Some(format!("/{pax_path}").as_str())
    );
}

/// As containerd unpacks it: ".." resolves within the root, so an image
/// cannot hide its apk database from the inventory behind it.
#[test]
fn paths_with_dot_dot_resolve_within_the_root() {
    // tar's builder refuses "..", so write that header by hand.
    let mut h = tar::Header::new_gnu();
    let data = b"P:evil\nV:1\n";
    h.as_gnu_mut().unwrap().name[..28].copy_from_slice(b"x/../lib/apk/db/installed\0\0\0");
    h.set_size(data.len() as u64);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let mut b = tar::Builder::new(Vec::new());
    b.append(&h, data.as_slice()).unwrap();
    let inv = scan(&[(b.into_inner().unwrap(), TAR)]).unwrap();
    let names: Vec<&str> = inv.packages.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["evil"]);
}

#[test]
fn empty_layers_and_no_layers() {
    assert_eq!(
        LayerScanner::new(Limits::default()).finish().unwrap(),
        Inventory::default()
    );
    assert!(scan(&[(Vec::new(), TAR), (gzip(&[]), GZ)]).unwrap().packages.is_empty());
}
