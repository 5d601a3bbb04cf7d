//! Inventory from image layers.
//!
//! Layers are streamed once, bottom to top. Only the few files that name
//! installed packages (package databases, Python and npm metadata, and
//! os-release for the distro) are kept in memory; everything else is read
//! past. Whiteouts and replacements from upper layers are applied to the kept
//! set as they stream by, so what `finish` parses is what the running
//! container would see.
//!
//! The tar stream is read in raw mode: the tar crate would otherwise read GNU
//! long names and PAX headers into memory without a bound, so those are
//! handled here, each capped.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::rc::Rc;

use tar::EntryType;

use crate::decompress::{self, Tally};
use crate::{Collector, Error, Inventory, Limits, apk, dpkg, npm, python};

/// Largest PAX extended header we read. Real ones hold a path, times and a
/// few xattrs: well under this.
const MAX_PAX_BYTES: u64 = 1 << 20;

/// Scans image layers for installed packages. Feed layers bottom to top with
/// [`LayerScanner::add_layer`], then call [`LayerScanner::finish`]. After an
/// error the scanner's state is unspecified (still bounded): drop it.
pub struct LayerScanner {
    limits: Limits,
    layers: usize,
    /// Normalized path → the layer it came from and its bytes.
    kept: BTreeMap<String, Kept>,
    kept_bytes: u64,
}

struct Kept {
    layer: usize,
    data: Vec<u8>,
}

/// The kinds of file worth keeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    OsRelease,
    Apk,
    DpkgStatus,
    DpkgStatusD,
    Python,
    Npm,
}

impl LayerScanner {
    pub fn new(limits: Limits) -> Self {
        LayerScanner {
            limits,
            layers: 0,
            kept: BTreeMap::new(),
            kept_bytes: 0,
        }
    }

    /// Streams one layer (tar, optionally gzip- or zstd-compressed), keeping
    /// interesting files and applying whiteouts to what lower layers left.
    /// `media_type` picks the decompressor; unknown ones are sniffed.
    pub fn add_layer<R: Read>(&mut self, reader: R, media_type: &str) -> Result<(), Error> {
        let layer = self.layers;
        self.layers += 1;
        let tally = Rc::new(Tally::default());
        let result = match decompress::open(reader, media_type, self.limits.max_layer_bytes, tally.clone()) {
            Ok(Ok(tar)) => self.scan(layer, tar),
            Ok(Err(unsupported)) => Err(LayerError::Bound(Error::UnsupportedCompression {
                layer,
                compression: unsupported.0,
            })),
            Err(e) => Err(LayerError::Io(e)),
        };
        // Whatever error surfaced, passing the bound is the cause to report.
        if tally.decompressed.get() > self.limits.max_layer_bytes {
            return Err(Error::LayerTooLarge {
                layer,
                limit: self.limits.max_layer_bytes,
            });
        }
        result.map_err(|e| match e {
            LayerError::Bound(e) => e,
            LayerError::Io(e) if tally.source_failed.get() => Error::Io { layer, source: e },
            LayerError::Io(e) => Error::MalformedLayer {
                layer,
                reason: e.to_string(),
            },
        })
    }

    fn scan(&mut self, layer: usize, reader: Box<dyn Read + '_>) -> Result<(), LayerError> {
        let mut archive = tar::Archive::new(reader);
        let entries = archive.entries()?.raw(true);
        let mut count = 0u64;
        // Set by GNU long-name and PAX headers for the entry that follows.
        let mut long_name: Option<Vec<u8>> = None;
        let mut pax_path: Option<Vec<u8>> = None;
        let mut pax_size: Option<u64> = None;
        for entry in entries {
            let mut entry = entry?;
            count += 1;
            if count > self.limits.max_entries {
                return Err(LayerError::Bound(Error::TooManyEntries {
                    layer,
                    limit: self.limits.max_entries,
                }));
            }
            let kind = entry.header().entry_type();
            let size = entry.size();
            match kind {
                EntryType::GNULongName => {
                    // The name plus its NUL terminator.
                    if size > (self.limits.max_path_bytes as u64).saturating_add(1) {
                        return Err(self.path_too_long(layer, size));
                    }
                    let mut name = read_bounded(&mut entry, size)?;
                    while name.last() == Some(&0) {
                        name.pop();
                    }
                    long_name = Some(name);
                    continue;
                }
                EntryType::XHeader => {
                    if size > MAX_PAX_BYTES {
                        return Err(malformed(format!("PAX header of {size} bytes")));
                    }
                    let data = read_bounded(&mut entry, size)?;
                    for ext in tar::PaxExtensions::new(&data) {
                        let ext = ext?;
                        match ext.key_bytes() {
                            b"path" => pax_path = Some(ext.value_bytes().to_vec()),
                            b"size" => {
                                pax_size = ext.value().ok().and_then(|v| v.trim().parse().ok());
                            }
                            _ => {}
                        }
                    }
                    continue;
                }
                // Global PAX headers and long link names change nothing we use.
                EntryType::XGlobalHeader | EntryType::GNULongLink => continue,
                _ => {}
            }
            // Raw mode leaves sizing to the header, so a PAX size that
            // disagrees would desynchronize the stream: refuse it.
            if let Some(pax) = pax_size.take()
                && pax != size
            {
                return Err(malformed(format!("PAX size {pax} differs from header size {size}")));
            }
            let path = match (pax_path.take(), long_name.take()) {
                (Some(p), _) | (None, Some(p)) => p,
                (None, None) => entry.path_bytes().into_owned(),
            };
            if path.len() > self.limits.max_path_bytes {
                return Err(self.path_too_long(layer, path.len() as u64));
            }
            self.apply(layer, &path, kind, size, &mut entry)?;
        }
        Ok(())
    }

    fn path_too_long(&self, layer: usize, len: u64) -> LayerError {
        LayerError::Bound(Error::PathTooLong {
            layer,
            len,
            limit: self.limits.max_path_bytes,
        })
    }

    /// Applies one entry to the kept set: whiteouts delete from lower layers,
    /// any other entry replaces what was at its path, and interesting regular
    /// files are read in.
    fn apply<R: Read>(
        &mut self,
        layer: usize,
        raw_path: &[u8],
        kind: EntryType,
        size: u64,
        entry: &mut R,
    ) -> Result<(), LayerError> {
        let lossy = String::from_utf8_lossy(raw_path);
        let Some(path) = normalize(&lossy) else {
            return Ok(());
        };
        let (dir, base) = match path.rsplit_once('/') {
            Some((d, b)) => (d, b),
            None => ("", path.as_str()),
        };
        if base == ".wh..wh..opq" {
            self.remove_under(dir, Some(layer));
            return Ok(());
        }
        if let Some(target) = base.strip_prefix(".wh.") {
            let victim = if dir.is_empty() {
                target.to_owned()
            } else {
                format!("{dir}/{target}")
            };
            self.remove(&victim, Some(layer));
            self.remove_under(&victim, Some(layer));
            return Ok(());
        }
        if path.is_empty() {
            return Ok(());
        }
        // A later entry at a path replaces the earlier file; a non-directory
        // also replaces a directory and everything below it.
        self.remove(&path, None);
        if kind != EntryType::Directory {
            self.remove_under(&path, None);
        }
        if !matches!(kind, EntryType::Regular | EntryType::Continuous) || classify(&path).is_none() {
            return Ok(());
        }
        self.keep(layer, path, size, entry)
    }

    fn keep<R: Read>(&mut self, layer: usize, path: String, size: u64, entry: &mut R) -> Result<(), LayerError> {
        let limit = self.limits.max_file_bytes;
        let too_large = |size| {
            LayerError::Bound(Error::FileTooLarge {
                layer,
                path: format!("/{path}"),
                size,
                limit,
            })
        };
        if size > limit {
            return Err(too_large(size));
        }
        let data = read_bounded(entry, limit.saturating_add(1))?;
        if data.len() as u64 > limit {
            return Err(too_large(data.len() as u64));
        }
        let total = self.kept_bytes.saturating_add(data.len() as u64);
        if total > self.limits.max_kept_bytes {
            return Err(LayerError::Bound(Error::KeptTooLarge {
                limit: self.limits.max_kept_bytes,
            }));
        }
        self.kept_bytes = total;
        self.kept.insert(path, Kept { layer, data });
        Ok(())
    }

    /// Removes the kept file at `path`, if it came from below `below` (or from
    /// anywhere when None).
    fn remove(&mut self, path: &str, below: Option<usize>) {
        if let Some(k) = self.kept.get(path)
            && below.is_none_or(|b| k.layer < b)
        {
            self.kept_bytes -= k.data.len() as u64;
            self.kept.remove(path);
        }
    }

    /// Removes kept files under directory `dir` ("" is the root).
    fn remove_under(&mut self, dir: &str, below: Option<usize>) {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let doomed: Vec<String> = self
            .kept
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter(|(_, k)| below.is_none_or(|b| k.layer < b))
            .map(|(p, _)| p.clone())
            .collect();
        for p in doomed {
            self.remove(&p, None);
        }
    }

    /// Parses the kept files into an inventory. The distro ID (and version)
    /// from os-release names the apk/deb purl namespace and `distro` qualifier.
    pub fn finish(self) -> Result<Inventory, Error> {
        let os = ["etc/os-release", "usr/lib/os-release"]
            .iter()
            .find_map(|p| self.kept.get(*p))
            .map(|k| OsRelease::parse(&k.data))
            .unwrap_or_default();
        let mut out = Collector::new(&self.limits, "image");
        for (path, kept) in &self.kept {
            let location = format!("/{path}");
            match classify(path) {
                Some(FileKind::Apk) => apk::parse(&kept.data, &location, &os, &mut out)?,
                Some(FileKind::DpkgStatus) => dpkg::parse(&kept.data, &location, &os, true, &mut out)?,
                Some(FileKind::DpkgStatusD) => dpkg::parse(&kept.data, &location, &os, false, &mut out)?,
                Some(FileKind::Python) => python::parse(&kept.data, &location, &mut out)?,
                Some(FileKind::Npm) => npm::parse(&kept.data, &location, &mut out)?,
                Some(FileKind::OsRelease) | None => {}
            }
        }
        Ok(out.finish())
    }
}

/// Errors inside a layer scan: bounds are final, I/O errors are classified
/// afterwards (source failure vs malformed data).
enum LayerError {
    Bound(Error),
    Io(io::Error),
}

impl From<io::Error> for LayerError {
    fn from(e: io::Error) -> Self {
        LayerError::Io(e)
    }
}

fn malformed(reason: String) -> LayerError {
    LayerError::Io(io::Error::new(io::ErrorKind::InvalidData, reason))
}

/// Reads at most `max` bytes, growing the buffer as data arrives rather than
/// trusting a declared size. The buffer is shrunk to what was read: reading
/// zero-fills its spare capacity (the tar reader has no `read_buf`), so
/// without it each kept file held 64 KiB of touched memory, and the 2,000
/// package metadata files of one image held 128 MiB of RSS until the scan
/// ended.
fn read_bounded<R: Read>(r: &mut R, max: u64) -> io::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(max.min(64 * 1024) as usize);
    r.take(max).read_to_end(&mut data)?;
    data.shrink_to_fit();
    Ok(data)
}

/// Normalizes a tar path: no leading "./" or "/", no empty or "." segments,
/// and ".." resolved within the root (a ".." at the root stays there), as
/// containerd unpacks it: `../../lib/apk/db/installed` is where a running
/// container finds the apk database, so it is read as that (an image cannot
/// hide its packages from the inventory behind "..").
pub(crate) fn normalize(path: &str) -> Option<String> {
    let mut segments = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    Some(segments.join("/"))
}

/// Which kind of metadata a normalized path holds, if any.
pub(crate) fn classify(path: &str) -> Option<FileKind> {
    match path {
        "etc/os-release" | "usr/lib/os-release" => return Some(FileKind::OsRelease),
        "lib/apk/db/installed" => return Some(FileKind::Apk),
        "var/lib/dpkg/status" => return Some(FileKind::DpkgStatus),
        _ => {}
    }
    if let Some(name) = path.strip_prefix("var/lib/dpkg/status.d/") {
        // Distroless keeps one stanza file per package, plus checksum lists.
        let ok = !name.is_empty() && !name.contains('/') && !name.starts_with('.') && !name.ends_with(".md5sums");
        return ok.then_some(FileKind::DpkgStatusD);
    }
    let segments: Vec<&str> = path.split('/').collect();
    let n = segments.len();
    let last = segments[n - 1];
    let parent = if n >= 2 { segments[n - 2] } else { "" };
    let grandparent = if n >= 3 { segments[n - 3] } else { "" };
    let is_site = |s: &str| s == "site-packages" || s == "dist-packages";
    if (last == "METADATA" && parent.ends_with(".dist-info") && is_site(grandparent))
        || (last == "PKG-INFO" && parent.ends_with(".egg-info"))
        || (last.ends_with(".egg-info") && last.len() > ".egg-info".len() && is_site(parent))
    {
        return Some(FileKind::Python);
    }
    if last == "package.json" {
        // node_modules/<name>/package.json or node_modules/@<scope>/<name>/package.json;
        // package.json files deeper inside a package are not packages.
        let nm = segments.iter().rposition(|s| *s == "node_modules")?;
        let rest = &segments[nm + 1..n - 1];
        let ok = match rest {
            [name] => !name.starts_with('.') && !name.starts_with('@'),
            [scope, name] => scope.len() > 1 && scope.starts_with('@') && !name.starts_with('.'),
            _ => false,
        };
        return ok.then_some(FileKind::Npm);
    }
    None
}

/// The distro facts that name OS package purls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OsRelease {
    /// Lowercase ID ("alpine", "wolfi", "debian", "ubuntu"), if well-formed.
    pub(crate) id: Option<String>,
    pub(crate) version_id: Option<String>,
}

impl OsRelease {
    pub(crate) fn parse(data: &[u8]) -> OsRelease {
        let text = String::from_utf8_lossy(data);
        let mut out = OsRelease::default();
        for line in text.lines() {
            let Some((key, value)) = line.trim().split_once('=') else {
                continue;
            };
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value)
                .to_ascii_lowercase();
            // os-release(5): IDs are 0-9, a-z, '.', '_' and '-'.
            let valid = !value.is_empty()
                && value.len() <= 64
                && value
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
            match key.trim() {
                "ID" if valid => out.id = Some(value),
                "VERSION_ID" if valid => out.version_id = Some(value),
                _ => {}
            }
        }
        out
    }

    /// The purl namespace: the ID, else the ecosystem's usual distro.
    pub(crate) fn namespace<'a>(&'a self, default: &'a str) -> &'a str {
        self.id.as_deref().unwrap_or(default)
    }

    /// The `distro` qualifier syft writes ("debian-12", "alpine-3.19.1"), so
    /// layer-derived purls match SBOM ones; None without an ID and version.
    pub(crate) fn distro(&self) -> Option<String> {
        Some(format!("{}-{}", self.id.as_deref()?, self.version_id.as_deref()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept file holds what it read, not the read's 64 KiB buffer.
    #[test]
    fn a_small_file_keeps_a_small_buffer() {
        let data = read_bounded(&mut &b"Name: six\nVersion: 1.16.0\n"[..], 1 << 20).unwrap();
        assert_eq!(data.len(), 26);
        assert!(data.capacity() < 1024, "capacity {}", data.capacity());
        let big = vec![7u8; 200_000];
        assert_eq!(read_bounded(&mut &big[..], 150_000).unwrap().len(), 150_000, "bounded");
    }

    #[test]
    fn paths() {
        assert_eq!(normalize("./usr//lib/./x").as_deref(), Some("usr/lib/x"));
        assert_eq!(normalize("/etc/os-release").as_deref(), Some("etc/os-release"));
        assert_eq!(normalize("a/../etc/passwd").as_deref(), Some("etc/passwd"));
        assert_eq!(
            normalize("../../lib/apk/db/installed").as_deref(),
            Some("lib/apk/db/installed")
        );
        assert_eq!(normalize("./").as_deref(), Some(""));
    }

    #[test]
    fn classification() {
        use FileKind::*;
        let cases = [
            ("lib/apk/db/installed", Some(Apk)),
            ("etc/os-release", Some(OsRelease)),
            ("var/lib/dpkg/status", Some(DpkgStatus)),
            ("var/lib/dpkg/status.d/libc6", Some(DpkgStatusD)),
            ("var/lib/dpkg/status.d/libc6.md5sums", None),
            ("var/lib/dpkg/status-old", None),
            (
                "usr/lib/python3/dist-packages/six-1.16.0.dist-info/METADATA",
                Some(Python),
            ),
            (
                "usr/local/lib/python3.12/site-packages/requests-2.31.0.dist-info/METADATA",
                Some(Python),
            ),
            ("usr/local/lib/python3.12/site-packages/x.dist-info/RECORD", None),
            ("opt/app/METADATA", None),
            ("usr/lib/python3/site-packages/foo.egg-info/PKG-INFO", Some(Python)),
            ("usr/lib/python3/site-packages/foo-1.0.egg-info", Some(Python)),
            ("usr/lib/python3/site-packages/.egg-info", None),
            ("app/node_modules/express/package.json", Some(Npm)),
            ("app/node_modules/@types/node/package.json", Some(Npm)),
            ("app/node_modules/a/node_modules/b/package.json", Some(Npm)),
            ("app/node_modules/express/lib/package.json", None),
            ("app/node_modules/@types/package.json", None),
            ("app/node_modules/.bin/package.json", None),
            ("app/package.json", None),
        ];
        for (path, want) in cases {
            assert_eq!(classify(path), want, "{path}");
        }
    }

    #[test]
    fn os_release() {
        let os = OsRelease::parse(b"NAME=\"Wolfi\"\nID=Wolfi\nVERSION_ID=20230201\n");
        assert_eq!(os.namespace("alpine"), "wolfi");
        assert_eq!(os.distro().as_deref(), Some("wolfi-20230201"));
        let os = OsRelease::parse(b"ID='bad id'\n");
        assert_eq!(os.namespace("debian"), "debian");
        assert_eq!(os.distro(), None);
    }
}
