//! Segment files: create, scan, sync; directory fsync.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::format::{
    BatchEnd, FORMAT_VERSION, FrameError, FrameReader, HeaderError, SEGMENT_HEADER_LEN,
    SegmentHeader, TIME_SLACK_MS, find_resync, segment_file_name,
};
use crate::time_index::TimeIndex;

/// Buffer size for sequential segment reads.
pub(crate) const READ_BUFFER: usize = 256 * 1024;

pub(crate) fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(segment_file_name(first))
}

/// Fsyncs a directory so that creates, renames and deletes in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates a segment: header written and fsynced, then the directory fsynced.
pub(crate) fn create_segment(dir: &Path, first: u64, created_ms: u64) -> io::Result<File> {
    use std::io::Write;
    let path = segment_path(dir, first);
    let mut file = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)?;
    let header = SegmentHeader {
        first_offset: first,
        created_ms,
        version: FORMAT_VERSION,
    };
    file.write_all(&header.encode())?;
    file.sync_data()?;
    sync_dir(dir)?;
    Ok(file)
}

/// Reads a segment header from the start of `file`.
pub(crate) fn read_header(file: &mut File) -> io::Result<Result<SegmentHeader, HeaderError>> {
    let mut buf = Vec::with_capacity(SEGMENT_HEADER_LEN as usize);
    file.by_ref()
        .take(SEGMENT_HEADER_LEN)
        .read_to_end(&mut buf)?;
    Ok(SegmentHeader::decode(&buf))
}

/// A header that is all zeros: the file was created but its header never reached disk.
pub(crate) fn unfinished_header(path: &Path) -> bool {
    let Ok(mut file) = File::open(path) else {
        return false;
    };
    let mut buf = Vec::new();
    if file
        .by_ref()
        .take(SEGMENT_HEADER_LEN)
        .read_to_end(&mut buf)
        .is_err()
    {
        return false;
    }
    buf.iter().all(|&b| b == 0)
        && file
            .metadata()
            .map(|m| m.len() <= SEGMENT_HEADER_LEN * 2)
            .unwrap_or(false)
}

/// The outcome of scanning a whole segment.
#[derive(Debug)]
pub(crate) struct Scan {
    pub header: Result<SegmentHeader, HeaderError>,
    pub file_len: u64,
    /// Complete, CRC-valid records before the first bad byte.
    pub records: u64,
    /// Length up to the end of the last good record (header included).
    pub good_len: u64,
    /// The first problem, if the segment does not end cleanly.
    pub problem: Option<FrameError>,
    /// Frames after the good prefix that were complete (CRC-valid or not) before the bytes
    /// stopped delimiting frames: what cutting at `good_len` loses.
    pub cut_records: u64,
    /// After a damaged but delimited frame (a CRC error with a sound length), the last
    /// CRC-valid frame that followed it: the records up to it (damaged ones included)
    /// and the length up to its end. A torn write leaves no valid frame after a bad
    /// one, so this is damage inside the segment, not a torn tail.
    pub valid_after_damage: Option<(u64, u64)>,
    pub times: TimeIndex,
    pub last_time_ms: Option<u64>,
}

/// Reads and checks every frame of a segment, without changing it.
pub(crate) fn scan_segment(path: &Path) -> io::Result<Scan> {
    let mut file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let header = read_header(&mut file)?;
    let mut scan = Scan {
        header,
        file_len,
        records: 0,
        good_len: file_len.min(SEGMENT_HEADER_LEN),
        problem: None,
        cut_records: 0,
        valid_after_damage: None,
        times: TimeIndex::new(true),
        last_time_ms: None,
    };
    if scan.header.is_err() || file_len < SEGMENT_HEADER_LEN {
        return Ok(scan);
    }
    let (first, version, created) = scan
        .header
        .as_ref()
        .map_or((0, 0, 0), |h| (h.first_offset, h.version, h.created_ms));
    let body = BufReader::with_capacity(READ_BUFFER, file);
    let mut reader = FrameReader::new(body, file_len - SEGMENT_HEADER_LEN).at_offset(first);
    let mut damaged_in: Option<BatchEnd> = None;
    loop {
        match reader.next_frame() {
            Ok(None) => break,
            Ok(Some(_)) if scan.problem.is_some() => {
                scan.cut_records += 1;
                let consumed = file_len - SEGMENT_HEADER_LEN - reader.remaining();
                scan.valid_after_damage = Some((
                    scan.records + scan.cut_records,
                    SEGMENT_HEADER_LEN + consumed,
                ));
            }
            Ok(Some(meta)) => {
                if scan.last_time_ms != Some(meta.time_ms) {
                    scan.times.push(first + scan.records, meta.time_ms);
                    scan.last_time_ms = Some(meta.time_ms);
                }
                scan.records += 1;
                scan.good_len += meta.frame_len;
            }
            Err(FrameError::Io(e)) => return Err(e),
            Err(err) => {
                if scan.problem.is_none() {
                    damaged_in = reader.batch();
                }
                let delimited = matches!(err, FrameError::Crc { .. });
                if delimited {
                    scan.cut_records += 1;
                }
                if scan.problem.is_none() {
                    scan.problem = Some(err);
                }
                if !delimited {
                    break;
                }
            }
        }
    }
    if version >= 2 && scan.problem.is_some() {
        // Batch marks place what follows the damage exactly; the guess above (a CRC
        // error with a sound length is one record) is for version-1 segments only.
        let lo = created.saturating_sub(TIME_SLACK_MS);
        let hi = crate::clock::now_ms().saturating_add(TIME_SLACK_MS);
        scan.valid_after_damage =
            placed_after_damage(path, first, scan.records, scan.good_len, damaged_in, lo, hi)?;
    }
    Ok(scan)
}

/// After damage at the end of a segment's good prefix (`records` records, `good_len`
/// bytes): the records placed after it by batch marks ([`find_resync`]), resyncing again
/// after each further damage, as `(records up to the last placed one, bytes up to its
/// end)`. `None` when nothing after the damage can be placed. Reads the rest of the file
/// into memory, which only damage costs.
fn placed_after_damage(
    path: &Path,
    first: u64,
    records: u64,
    good_len: u64,
    batch: Option<BatchEnd>,
    lo: u64,
    hi: u64,
) -> io::Result<Option<(u64, u64)>> {
    use std::io::{Seek, SeekFrom};
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(good_len))?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest)?;
    let body_at = good_len - SEGMENT_HEADER_LEN;
    let mut batch = batch.filter(|b| b.pos >= body_at).map(|b| BatchEnd {
        pos: b.pos - body_at,
        offset: b.offset,
    });
    let mut pos = 0usize;
    let mut damaged = first + records;
    let mut placed = None;
    while let Some((skip, offset)) = find_resync(&rest[pos..], damaged, batch, None, lo, hi) {
        pos += skip;
        let here = &rest[pos..];
        let mut reader = FrameReader::new(here, here.len() as u64).at_offset(offset);
        let mut consumed = 0u64;
        let mut next = offset;
        loop {
            match reader.next_frame() {
                Ok(Some(meta)) => {
                    consumed += meta.frame_len;
                    next += 1;
                    placed = Some((next - first, good_len + (pos as u64) + consumed));
                }
                Ok(None) => return Ok(placed),
                Err(_) => break,
            }
        }
        batch = reader
            .batch()
            .filter(|b| b.pos >= consumed)
            .map(|b| BatchEnd {
                pos: b.pos - consumed,
                offset: b.offset,
            });
        damaged = next;
        pos += usize::try_from(consumed).unwrap_or(usize::MAX);
    }
    Ok(placed)
}

/// Moves a damaged segment into `<dir>/quarantine/`; returns its new path.
pub(crate) fn quarantine(dir: &Path, path: &Path) -> io::Result<PathBuf> {
    quarantine_as(dir, path, "")
}

/// [`quarantine`] under a name starting with `prefix`: with `"junk-"`, a file that is
/// not a segment of this log is kept out of the names recovery reads as boundaries.
pub(crate) fn quarantine_as(dir: &Path, path: &Path, prefix: &str) -> io::Result<PathBuf> {
    let qdir = dir.join("quarantine");
    fs::create_dir_all(&qdir)?;
    let name = path
        .file_name()
        .map(|n| PathBuf::from(format!("{prefix}{}", n.to_string_lossy())))
        .unwrap_or_default();
    let mut target = qdir.join(&name);
    let mut n = 1;
    while target.exists() {
        target = qdir.join(format!("{}.{n}", name.display()));
        n += 1;
    }
    fs::rename(path, &target)?;
    sync_dir(&qdir)?;
    sync_dir(dir)?;
    Ok(target)
}
