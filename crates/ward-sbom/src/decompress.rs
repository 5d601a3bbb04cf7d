//! Layer decompression: choosing gzip, zstd or plain tar, and counting bytes.
//!
//! A compressed layer is a small input that can expand without end, so every
//! decompressed byte is counted and reading stops once the per-layer bound is
//! passed. The same shared [`Tally`] records whether the caller's own reader
//! failed, which lets the scanner tell "could not read" (maybe worth a retry)
//! from "not a valid layer" (never worth one).

use std::cell::Cell;
use std::io::{self, BufRead, BufReader, Read};
use std::rc::Rc;

use ruzstd::decoding::FrameDecoder;
use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};

/// What the readers observed, read back after a failure.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) decompressed: Cell<u64>,
    pub(crate) source_failed: Cell<bool>,
}

pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
}

/// The answer for compressions we recognize but do not decode.
pub(crate) struct Unsupported(pub(crate) &'static str);

/// Picks the decompressor from the media type, or from magic bytes when the
/// media type does not say (or says plain tar, which is sniffed too because
/// mislabeled layers exist). Returns the reader of tar bytes.
pub(crate) fn open<'a, R: Read + 'a>(
    reader: R,
    media_type: &str,
    limit: u64,
    tally: Rc<Tally>,
) -> Result<Result<Box<dyn Read + 'a>, Unsupported>, io::Error> {
    let mut source = Source {
        inner: reader,
        tally: tally.clone(),
    };
    let media_type = media_type.trim().to_ascii_lowercase();
    let declared = if media_type.ends_with("+gzip") || media_type.ends_with(".tar.gzip") {
        Some(Compression::Gzip)
    } else if media_type.ends_with("+zstd") || media_type.ends_with(".tar.zstd") {
        Some(Compression::Zstd)
    } else {
        None
    };
    let (compression, prefix) = match declared {
        Some(c) => (c, Vec::new()),
        None => {
            let mut magic = [0u8; 6];
            let n = read_up_to(&mut source, &mut magic)?;
            let magic = &magic[..n];
            let compression = if magic.starts_with(&[0x1f, 0x8b]) {
                Compression::Gzip
            } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
                || (magic.len() >= 4 && magic[0] & 0xf0 == 0x50 && magic[1..4] == [0x2a, 0x4d, 0x18])
            {
                // A zstd frame, or a skippable frame (zstd:chunked starts with data frames,
                // but other writers may lead with a skippable one).
                Compression::Zstd
            } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
                return Ok(Err(Unsupported("xz")));
            } else if magic.starts_with(b"BZh") {
                return Ok(Err(Unsupported("bzip2")));
            } else {
                Compression::None
            };
            (compression, magic.to_vec())
        }
    };
    let raw = io::Cursor::new(prefix).chain(source);
    let tar: Box<dyn Read + 'a> = match compression {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(raw)),
        Compression::Zstd => Box::new(ZstdFrames::new(BufReader::new(raw))),
    };
    Ok(Ok(Box::new(Counted {
        inner: tar,
        limit,
        tally,
    })))
}

fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The caller's reader, marked when it fails.
struct Source<R> {
    inner: R,
    tally: Rc<Tally>,
}

impl<R: Read> Read for Source<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            if e.kind() != io::ErrorKind::Interrupted {
                self.tally.source_failed.set(true);
            }
        })
    }
}

/// Decompressed bytes, failing once more than `limit` have come through.
struct Counted<'a> {
    inner: Box<dyn Read + 'a>,
    limit: u64,
    tally: Rc<Tally>,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.tally.decompressed.get() > self.limit {
            return Err(io::Error::other("layer decompression bound passed"));
        }
        let n = self.inner.read(buf)?;
        let total = self.tally.decompressed.get().saturating_add(n as u64);
        self.tally.decompressed.set(total);
        if total > self.limit {
            return Err(io::Error::other("layer decompression bound passed"));
        }
        Ok(n)
    }
}

/// All frames of a zstd stream, in order, skipping skippable frames. ruzstd's
/// own streaming reader stops after one frame; zstd:chunked layers and
/// `zstd` run over concatenated inputs have many.
struct ZstdFrames<R> {
    source: R,
    decoder: FrameDecoder,
    in_frame: bool,
}

impl<R: BufRead> ZstdFrames<R> {
    fn new(source: R) -> Self {
        ZstdFrames {
            source,
            decoder: FrameDecoder::new(),
            in_frame: false,
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.in_frame {
                // While a frame is open, read() drains what lies beyond the
                // window; once it is finished, everything that is left.
                let n = self.decoder.read(buf)?;
                if n > 0 {
                    return Ok(n);
                }
                if self.decoder.is_finished() {
                    self.in_frame = false;
                    continue;
                }
                // Each call consumes at least a block header from the source,
                // so this loop always progresses or fails.
                self.decoder
                    .decode_blocks(&mut self.source, ruzstd::decoding::BlockDecodingStrategy::UptoBlocks(1))
                    .map_err(zstd_error)?;
            } else {
                if self.source.fill_buf()?.is_empty() {
                    return Ok(0);
                }
                match self.decoder.init(&mut self.source) {
                    Ok(()) => self.in_frame = true,
                    Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                        length, ..
                    })) => {
                        let skipped = io::copy(&mut (&mut self.source).take(u64::from(length)), &mut io::sink())?;
                        if skipped != u64::from(length) {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "zstd skippable frame is truncated",
                            ));
                        }
                    }
                    Err(e) => return Err(zstd_error(e)),
                }
            }
        }
    }
}

fn zstd_error(e: FrameDecoderError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("zstd: {e}"))
}
