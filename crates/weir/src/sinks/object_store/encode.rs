//! The open object's encoder: Parquet (the local Parquet sink's encoder, same schema and
//! footer) or NDJSON (plain, gzip or zstd), writing into a buffer from which whole
//! parts of `part_size` bytes are cut as soon as they fill. Synchronous (CPU work: the
//! sink runs it on a blocking thread).

use std::io::Write;

use bytes::buf::Writer;
use bytes::{BufMut, Bytes, BytesMut};

use super::config::{NdjsonCompression, ObjectStoreConfig};
use crate::pipeline::Unencodable;
use crate::record::Record;
use crate::sinks::parquet::{EncoderSettings, FooterMetadata, ParquetEncoder};

/// How the sink's objects are encoded.
#[derive(Debug, Clone)]
pub enum Encoding {
    /// Parquet with these settings.
    Parquet(Box<EncoderSettings>),
    /// NDJSON, compressed or not.
    Ndjson(NdjsonCompression),
}

impl Encoding {
    /// The encoding `config` asks for.
    pub fn of(config: &ObjectStoreConfig) -> Self {
        match &config.parquet {
            Some(encoding) => Encoding::Parquet(Box::new(EncoderSettings::new(encoding))),
            None => Encoding::Ndjson(config.ndjson_compression),
        }
    }

    /// The objects' file extension.
    pub fn extension(&self) -> &'static str {
        match self {
            Encoding::Parquet(_) => "parquet",
            Encoding::Ndjson(NdjsonCompression::None) => "ndjson",
            Encoding::Ndjson(NdjsonCompression::Gzip) => "ndjson.gz",
            Encoding::Ndjson(NdjsonCompression::Zstd) => "ndjson.zst",
        }
    }
}

enum Ndjson {
    Plain(Writer<BytesMut>),
    Gzip(flate2::write::GzEncoder<Writer<BytesMut>>),
    Zstd(zstd::stream::write::Encoder<'static, Writer<BytesMut>>),
}

enum Inner {
    Parquet(Box<ParquetEncoder<Writer<BytesMut>>>),
    Ndjson(Ndjson),
}

/// One object being encoded.
pub struct ObjectEncoder {
    inner: Inner,
    /// Bytes already cut into parts.
    cut: u64,
    /// A line being built (NDJSON).
    line: Vec<u8>,
}

impl std::fmt::Debug for ObjectEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectEncoder")
            .field("cut", &self.cut)
            .finish_non_exhaustive()
    }
}

fn text(e: impl std::fmt::Display) -> String {
    format!("encoding an object: {e}")
}

impl ObjectEncoder {
    /// Starts an object.
    ///
    /// # Errors
    ///
    /// The encoder could not start (a Parquet header, a compressor).
    pub fn new(encoding: &Encoding) -> Result<Self, String> {
        let out = BytesMut::new().writer();
        let inner = match encoding {
            Encoding::Parquet(settings) => {
                Inner::Parquet(Box::new(ParquetEncoder::new(out, settings).map_err(text)?))
            }
            Encoding::Ndjson(NdjsonCompression::None) => Inner::Ndjson(Ndjson::Plain(out)),
            Encoding::Ndjson(NdjsonCompression::Gzip) => Inner::Ndjson(Ndjson::Gzip(
                flate2::write::GzEncoder::new(out, flate2::Compression::default()),
            )),
            Encoding::Ndjson(NdjsonCompression::Zstd) => Inner::Ndjson(Ndjson::Zstd(
                zstd::stream::write::Encoder::new(out, 3).map_err(text)?,
            )),
        };
        Ok(Self {
            inner,
            cut: 0,
            line: Vec::new(),
        })
    }

    fn buffer(&mut self) -> &mut BytesMut {
        match &mut self.inner {
            Inner::Parquet(p) => p.output_mut().get_mut(),
            Inner::Ndjson(Ndjson::Plain(w)) => w.get_mut(),
            Inner::Ndjson(Ndjson::Gzip(g)) => g.get_mut().get_mut(),
            Inner::Ndjson(Ndjson::Zstd(z)) => z.get_mut().get_mut(),
        }
    }

    /// Appends `records`; whole parts are cut into `parts` as the buffer fills, so that
    /// it never holds more than `part_size` plus what one record (NDJSON) or one row
    /// group flush (Parquet) adds. Records NDJSON cannot encode go to `rejects`.
    ///
    /// # Errors
    ///
    /// The encoder failed; the object is then unusable.
    pub fn append(
        &mut self,
        records: &[Record],
        part_size: u64,
        parts: &mut Vec<Bytes>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<(), String> {
        if let Inner::Parquet(p) = &mut self.inner {
            p.append(records).map_err(text)?;
            self.cut_parts(part_size, parts);
            return Ok(());
        }
        for record in records {
            self.line.clear();
            if let Err(reason) = record.write_ndjson(&mut self.line) {
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
            self.cut_parts(part_size, parts);
        }
        Ok(())
    }

    fn cut_parts(&mut self, part_size: u64, parts: &mut Vec<Bytes>) {
        let size = usize::try_from(part_size).unwrap_or(usize::MAX);
        while self.buffer().len() >= size {
            let part = self.buffer().split_to(size).freeze();
            self.cut += part.len() as u64;
            parts.push(part);
        }
    }

    /// The object's size so far (parts cut, bytes buffered, a row group in progress).
    pub fn size(&mut self) -> u64 {
        let in_progress = match &self.inner {
            Inner::Parquet(p) => p.buffered_bytes(),
            Inner::Ndjson(_) => 0,
        };
        self.cut + self.buffer().len() as u64 + in_progress
    }

    /// Bytes held in memory: the buffer and a Parquet row group in progress.
    pub fn held(&mut self) -> u64 {
        let in_progress = match &self.inner {
            Inner::Parquet(p) => p.buffered_bytes(),
            Inner::Ndjson(_) => 0,
        };
        self.buffer().len() as u64 + in_progress
    }

    /// Ends the object (a Parquet footer recording `footer` and the offsets
    /// `first..=last`, or the compressor's trailer); returns the whole parts still to
    /// send and the last, shorter one (possibly empty).
    ///
    /// # Errors
    ///
    /// The encoder failed.
    pub fn finish(
        self,
        footer: &FooterMetadata,
        first: u64,
        last: u64,
        part_size: u64,
    ) -> Result<(Vec<Bytes>, Bytes), String> {
        let mut rest = match self.inner {
            Inner::Parquet(p) => p.finish(footer, first, last).map_err(text)?.into_inner(),
            Inner::Ndjson(Ndjson::Plain(w)) => w.into_inner(),
            Inner::Ndjson(Ndjson::Gzip(g)) => g.finish().map_err(text)?.into_inner(),
            Inner::Ndjson(Ndjson::Zstd(z)) => z.finish().map_err(text)?.into_inner(),
        };
        let size = usize::try_from(part_size).unwrap_or(usize::MAX);
        let mut parts = Vec::new();
        while rest.len() > size {
            parts.push(rest.split_to(size).freeze());
        }
        Ok((parts, rest.freeze()))
    }
}
