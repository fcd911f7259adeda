//! The open object's encoder: Parquet (the local Parquet sink's encoder, same schema and
//! footer) or NDJSON (plain, gzip or zstd), writing into a buffer from which whole
//! parts of `part_size` bytes are cut as soon as they fill. Synchronous (CPU work: the
//! sink runs it on a blocking thread).

use std::io::Write;

use bytes::Bytes;

use super::config::{NdjsonCompression, ObjectStoreConfig};
use crate::pipeline::Unencodable;
use crate::record::Line;
use crate::record::Record;
use crate::sinks::parquet::{EncoderSettings, FooterMetadata, ParquetEncoder};

/// How the sink's objects are encoded.
#[derive(Debug, Clone)]
pub enum Encoding {
    /// Parquet with these settings.
    Parquet(Box<EncoderSettings>),
    /// NDJSON lines (envelopes, payloads or projected fields), compressed or not.
    Ndjson(NdjsonCompression, Line),
}

impl Encoding {
    /// The encoding `config` asks for.
    pub fn of(config: &ObjectStoreConfig) -> Self {
        match &config.parquet {
            Some(encoding) => Encoding::Parquet(Box::new(EncoderSettings::new(
                encoding,
                config.schema.as_ref(),
            ))),
            None => Encoding::Ndjson(config.ndjson_compression, config.line.clone()),
        }
    }

    /// The typed schema's counters, with one.
    pub fn typed_stats(&self) -> Option<&std::sync::Arc<crate::sinks::schema::TypedStats>> {
        match self {
            Encoding::Parquet(settings) => settings.typed_stats(),
            Encoding::Ndjson(..) => None,
        }
    }

    /// The objects' file extension.
    pub fn extension(&self) -> &'static str {
        match self {
            Encoding::Parquet(_) => "parquet",
            Encoding::Ndjson(NdjsonCompression::None, _) => "ndjson",
            Encoding::Ndjson(NdjsonCompression::Gzip, _) => "ndjson.gz",
            Encoding::Ndjson(NdjsonCompression::Zstd, _) => "ndjson.zst",
        }
    }
}

enum Ndjson {
    Plain(Parts),
    Gzip(flate2::write::GzEncoder<Parts>),
    Zstd(zstd::stream::write::Encoder<'static, Parts>),
}

enum Inner {
    Parquet(Box<ParquetEncoder<Parts>>),
    Ndjson(Ndjson),
}

/// The encoder's output: bytes fill parts of exactly `size` bytes, each its own
/// allocation, grown by doubling up to `size` and never past it. A part that fills is
/// set aside whole and the next byte starts a new one.
///
/// A part cut off a shared growing buffer (`BytesMut::split_to`) would keep the whole
/// buffer alive, up to twice its own size after the buffer's last doubling, for as long
/// as its upload lasts: `upload_concurrency` parts uploading pinned about twice
/// `upload_concurrency × part_size`.
struct Parts {
    size: usize,
    filling: Vec<u8>,
    full: Vec<Bytes>,
    /// Bytes of the parts already taken.
    taken: u64,
}

impl Parts {
    fn new(size: usize) -> Self {
        Self {
            size,
            filling: Vec::new(),
            full: Vec::new(),
            taken: 0,
        }
    }

    /// Bytes written so far.
    fn written(&self) -> u64 {
        self.taken + self.held_full() + self.filling.len() as u64
    }

    fn held_full(&self) -> u64 {
        self.full.iter().map(|p| p.len() as u64).sum()
    }

    /// Bytes of memory held: full parts not yet taken and the part being filled
    /// (its capacity, not its length).
    fn held(&self) -> u64 {
        self.held_full() + self.filling.capacity() as u64
    }

    /// Moves the full parts into `parts`.
    fn take(&mut self, parts: &mut Vec<Bytes>) {
        for part in self.full.drain(..) {
            self.taken += part.len() as u64;
            parts.push(part);
        }
    }

    /// Every part: the full ones, and the last, shorter one (possibly empty; when the
    /// bytes end on a part boundary, the last full part).
    fn finish(mut self) -> (Vec<Bytes>, Bytes) {
        let mut filling = std::mem::take(&mut self.filling);
        if filling.is_empty()
            && let Some(last) = self.full.pop()
        {
            return (self.full, last);
        }
        filling.shrink_to_fit();
        (self.full, Bytes::from(filling))
    }
}

impl Write for Parts {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.size - self.filling.len());
        let needed = self.filling.len() + n;
        if needed > self.filling.capacity() {
            let grown = (self.filling.capacity() * 2).max(needed).min(self.size);
            self.filling.reserve_exact(grown - self.filling.len());
        }
        self.filling.extend_from_slice(&buf[..n]);
        if self.filling.len() == self.size {
            let part = std::mem::take(&mut self.filling);
            self.full.push(Bytes::from(part));
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One object being encoded.
pub struct ObjectEncoder {
    inner: Inner,
    /// A line being built (NDJSON).
    line: Vec<u8>,
    /// What each NDJSON line is.
    how: Line,
    /// Records encoded (not counting those sent to `rejects`).
    records: u64,
}

impl std::fmt::Debug for ObjectEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectEncoder").finish_non_exhaustive()
    }
}

fn text(e: impl std::fmt::Display) -> String {
    format!("encoding an object: {e}")
}

impl ObjectEncoder {
    /// Starts an object whose bytes are cut into parts of `part_size`.
    ///
    /// # Errors
    ///
    /// The encoder could not start (a Parquet header, a compressor).
    pub fn new(encoding: &Encoding, part_size: u64) -> Result<Self, String> {
        let size = usize::try_from(part_size).unwrap_or(usize::MAX).max(1);
        let out = Parts::new(size);
        let inner = match encoding {
            Encoding::Parquet(settings) => {
                Inner::Parquet(Box::new(ParquetEncoder::new(out, settings).map_err(text)?))
            }
            Encoding::Ndjson(NdjsonCompression::None, _) => Inner::Ndjson(Ndjson::Plain(out)),
            Encoding::Ndjson(NdjsonCompression::Gzip, _) => Inner::Ndjson(Ndjson::Gzip(
                flate2::write::GzEncoder::new(out, flate2::Compression::default()),
            )),
            Encoding::Ndjson(NdjsonCompression::Zstd, _) => Inner::Ndjson(Ndjson::Zstd(
                zstd::stream::write::Encoder::new(out, 3).map_err(text)?,
            )),
        };
        Ok(Self {
            inner,
            line: Vec::new(),
            how: match encoding {
                Encoding::Ndjson(_, how) => how.clone(),
                Encoding::Parquet(_) => Line::Envelope,
            },
            records: 0,
        })
    }

    fn output(&mut self) -> &mut Parts {
        match &mut self.inner {
            Inner::Parquet(p) => p.output_mut(),
            Inner::Ndjson(Ndjson::Plain(w)) => w,
            Inner::Ndjson(Ndjson::Gzip(g)) => g.get_mut(),
            Inner::Ndjson(Ndjson::Zstd(z)) => z.get_mut(),
        }
    }

    /// Appends `records`; the parts that fill are moved into `parts`, so that the
    /// encoder never holds more than the part being filled plus what one record
    /// (NDJSON) or one row group flush (Parquet) adds. Records NDJSON cannot encode go
    /// to `rejects`.
    ///
    /// # Errors
    ///
    /// The encoder failed; the object is then unusable.
    pub fn append(
        &mut self,
        records: &[Record],
        parts: &mut Vec<Bytes>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<(), String> {
        if let Inner::Parquet(p) = &mut self.inner {
            let rejected = rejects.len();
            p.append(records, rejects).map_err(text)?;
            self.records += (records.len() - (rejects.len() - rejected)) as u64;
            self.output().take(parts);
            return Ok(());
        }
        for record in records {
            self.line.clear();
            if let Err(reason) = record.write_line(&self.how, &mut self.line) {
                rejects.push(Unencodable {
                    record: record.clone(),
                    reason,
                });
                continue;
            }
            let Inner::Ndjson(n) = &mut self.inner else {
                unreachable!("checked above")
            };
            let written = match n {
                Ndjson::Plain(w) => w.write_all(&self.line),
                Ndjson::Gzip(g) => g.write_all(&self.line),
                Ndjson::Zstd(z) => z.write_all(&self.line),
            };
            written.map_err(text)?;
            self.records += 1;
            self.output().take(parts);
        }
        Ok(())
    }

    /// Records encoded so far (those sent to `rejects` not counted).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The object's size so far (parts cut, bytes buffered, a row group in progress).
    pub fn size(&mut self) -> u64 {
        let in_progress = match &self.inner {
            Inner::Parquet(p) => p.buffered_bytes(),
            Inner::Ndjson(_) => 0,
        };
        self.output().written() + in_progress
    }

    /// Bytes held in memory: the part being filled (its allocation) and a Parquet row
    /// group in progress.
    pub fn held(&mut self) -> u64 {
        let in_progress = match &self.inner {
            Inner::Parquet(p) => p.buffered_bytes(),
            Inner::Ndjson(_) => 0,
        };
        self.output().held() + in_progress
    }

    /// Ends the object (a Parquet footer recording `footer` and the offsets
    /// `first..=last`, or the compressor's trailer); returns the whole parts still to
    /// send and the last one, at most `part_size` (possibly empty).
    ///
    /// # Errors
    ///
    /// The encoder failed.
    pub fn finish(
        self,
        footer: &FooterMetadata,
        first: u64,
        last: u64,
    ) -> Result<(Vec<Bytes>, Bytes), String> {
        let parts = match self.inner {
            Inner::Parquet(p) => p.finish(footer, first, last).map_err(text)?,
            Inner::Ndjson(Ndjson::Plain(w)) => w,
            Inner::Ndjson(Ndjson::Gzip(g)) => g.finish().map_err(text)?,
            Inner::Ndjson(Ndjson::Zstd(z)) => z.finish().map_err(text)?,
        };
        Ok(parts.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` records with `size` pseudo-random hex digits each, so that Parquet's
    /// compression cannot shrink them to nothing.
    fn records(n: usize, size: usize) -> Vec<Record> {
        let source: std::sync::Arc<str> = "gen".into();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut pad = move || -> String {
            (0..size)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from_digit((state % 16) as u32, 16).expect("a hex digit")
                })
                .collect()
        };
        (0..n)
            .map(|i| Record {
                source: std::sync::Arc::clone(&source),
                key: format!("k{}", i % 7),
                timestamp_ms: 1_700_000_000_000 + i as i64,
                payload: Bytes::from(format!("{{\"i\":{i},\"pad\":\"{}\"}}", pad())),
                attributes: Vec::new(),
            })
            .collect()
    }

    fn footer() -> FooterMetadata {
        FooterMetadata {
            config_hash: "sha256:0123abcd".to_owned(),
            on_full: weir_wal::OnFull::Block,
        }
    }

    /// Every part is the only owner of an allocation no larger than itself, so the
    /// parts uploading hold `upload_concurrency × part_size` and no more.
    fn assert_parts_own_their_bytes(parts: Vec<Bytes>, part_size: usize) {
        for (i, part) in parts.into_iter().enumerate() {
            let len = part.len();
            assert!(len <= part_size, "part {i}: {len} > {part_size}");
            let owned = part
                .try_into_mut()
                .unwrap_or_else(|_| panic!("part {i} shares its allocation"));
            assert_eq!(owned.capacity(), len, "part {i}: capacity beyond its bytes");
        }
    }

    fn encode(encoding: &Encoding, part_size: usize) -> (Vec<Bytes>, u64) {
        let mut encoder = ObjectEncoder::new(encoding, part_size as u64).unwrap();
        let (mut parts, mut rejects, mut max_held) = (Vec::new(), Vec::new(), 0);
        for chunk in records(6000, 300).chunks(250) {
            encoder.append(chunk, &mut parts, &mut rejects).unwrap();
            max_held = max_held.max(encoder.held());
        }
        assert!(rejects.is_empty());
        let (rest_parts, last) = encoder.finish(&footer(), 0, 5999).unwrap();
        parts.extend(rest_parts);
        parts.push(last);
        (parts, max_held)
    }

    #[test]
    fn ndjson_parts_are_exact_allocations() {
        let part_size = 256 * 1024;
        let (parts, max_held) = encode(
            &Encoding::Ndjson(NdjsonCompression::None, Line::Envelope),
            part_size,
        );
        assert!(parts.len() > 4, "{} parts", parts.len());
        let total: usize = parts.iter().map(Bytes::len).sum();
        assert!(
            parts[..parts.len() - 1]
                .iter()
                .all(|p| p.len() == part_size)
        );
        assert!(total > 6000 * 300);
        // The part being filled never grows past part_size.
        assert!(max_held <= part_size as u64, "{max_held}");
        assert_parts_own_their_bytes(parts, part_size);
    }

    #[test]
    fn parquet_parts_are_exact_allocations() {
        let settings = crate::sinks::parquet::ParquetEncoding {
            row_group_rows: 65_536.try_into().expect("non-zero"),
            row_group_bytes: crate::keys::ByteSize::new(64 * 1024).expect("non-zero"),
            compression: crate::sinks::parquet::Compression::Zstd,
        };
        let encoding = Encoding::Parquet(Box::new(EncoderSettings::new(&settings, None)));
        let part_size = 128 * 1024;
        let (parts, _) = encode(&encoding, part_size);
        assert!(parts.len() > 2, "{} parts", parts.len());
        assert_parts_own_their_bytes(parts, part_size);
    }

    #[test]
    fn an_object_ending_on_a_part_boundary_ends_with_that_part() {
        let mut encoder = ObjectEncoder::new(
            &Encoding::Ndjson(NdjsonCompression::None, Line::Envelope),
            4,
        )
        .unwrap();
        encoder.output().write_all(b"abcdefgh").unwrap();
        let (parts, last) = encoder.finish(&footer(), 0, 0).unwrap();
        assert_eq!(parts, vec![Bytes::from_static(b"abcd")]);
        assert_eq!(last, Bytes::from_static(b"efgh"));
    }
}
