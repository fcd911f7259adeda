//! Stray files in the WAL directory: recovery trusts a file's contents over its name
//! (see [`set_aside_strays`]).

use std::fs::{self, File};
use std::path::Path;

use crate::core::Hole;
use crate::error::OpenError;
use crate::format::{FRAME_HEADER_LEN, HeaderError, SEGMENT_HEADER_LEN};
use crate::open_report::{OpenReport, QuarantinedSegment, warn_quarantined};
use crate::segment::{
    quarantine, quarantine_as, read_header, scan_segment, segment_path, unfinished_header,
};

/// What reading a segment file's header found.
enum Found {
    /// A header that agrees with the name.
    Good,
    /// A header of a newer format: left to the caller, which refuses to open.
    Version,
    /// Created but never given a header (a crash while rotating): left to the tail's
    /// handling, which removes it.
    Unfinished,
    /// Not readable as a segment of this log: why.
    Suspect(String),
    /// Not readable at all (permissions, a directory, an I/O error): why, and its
    /// length when it is a regular file.
    Unreadable(String, Option<u64>),
}

fn read_found(path: &Path, first: u64) -> Found {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return Found::Unreadable(format!("unreadable: {e}"), None),
    };
    if !meta.is_file() {
        return Found::Unreadable("not a regular file (a directory?)".to_owned(), None);
    }
    let len = Some(meta.len());
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return Found::Unreadable(format!("unreadable: {e}"), len),
    };
    match read_header(&mut file) {
        Err(e) => Found::Unreadable(format!("unreadable: {e}"), len),
        Ok(Err(HeaderError::Version { .. })) => Found::Version,
        Ok(Ok(h)) if h.first_offset == first => Found::Good,
        Ok(Ok(h)) => Found::Suspect(format!(
            "header says first offset {}, name says {first}",
            h.first_offset
        )),
        Ok(Err(_)) if meta.len() <= SEGMENT_HEADER_LEN || unfinished_header(path) => {
            Found::Unfinished
        }
        Ok(Err(e)) => Found::Suspect(e.to_string()),
    }
}

/// Recovery trusts a file's contents over its name. A file named like a segment whose
/// header is unreadable, damaged or disagrees with its name is a lost segment of this
/// log only if its neighbour agrees: the good segment before it ends exactly where its
/// name begins. Otherwise it is a stray (junk copied in, a directory, a file from
/// another log): it is moved to `quarantine/junk-<name>` (a name later opens do not read
/// as a boundary), logged at WARN with the reason, and takes no offsets: it neither
/// moves the durable end nor shortens the segment before it.
///
/// A suspect with no good segment before it stays for the usual handling (a counted
/// hole up to the next segment). A file that cannot be read at all is never fatal: as a
/// stray it is set aside like the others; as a segment of this log (or with no good
/// segment before it) it is quarantined and its range, up to the next segment, is a
/// hole (returned). An unreadable *last* segment has no next one: its hole is as many
/// offsets as it could have held (one per frame header in its length, or, with no
/// length, in `segment_cap` bytes, the most a segment holds under this configuration),
/// so that new records never reuse an offset it may have given out: cursors and object
/// names depend on them.
pub(crate) fn set_aside_strays(
    dir: &Path,
    firsts: &mut Vec<u64>,
    report: &mut OpenReport,
    segment_cap: u64,
) -> Result<Vec<Hole>, OpenError> {
    let found: Vec<(u64, Found)> = firsts
        .iter()
        .map(|&first| (first, read_found(&segment_path(dir, first), first)))
        .collect();
    let mut holes = Vec::new();
    let suspect = |f: &Found| matches!(f, Found::Suspect(_) | Found::Unreadable(..));
    if !found.iter().any(|(_, f)| suspect(f)) {
        return Ok(holes);
    }
    let mut ends: Vec<(u64, u64)> = Vec::new(); // (first, end by scanning) of good ones
    let mut strays = Vec::new();
    let mut lost = Vec::new();
    for (i, (first, f)) in found.iter().enumerate() {
        let (reason, unreadable, len) = match f {
            Found::Suspect(r) => (r, false, None),
            Found::Unreadable(r, len) => (r, true, *len),
            _ => continue,
        };
        let prev = found[..i]
            .iter()
            .rev()
            .find(|(_, f)| matches!(f, Found::Good))
            .map(|(p, _)| *p);
        let prev_end = match prev {
            None => None,
            Some(prev) => Some(match ends.iter().find(|(f, _)| *f == prev) {
                Some(&(_, end)) => end,
                None => {
                    let path = segment_path(dir, prev);
                    let scan =
                        scan_segment(&path).map_err(|e| OpenError::io("scanning", &path, e))?;
                    ends.push((prev, prev + scan.records));
                    prev + scan.records
                }
            }),
        };
        match (prev, prev_end) {
            (Some(prev), Some(end)) if end != *first => {
                strays.push((*first, reason.clone(), prev, end));
            }
            _ if unreadable => match found.get(i + 1) {
                Some(&(next, _)) => lost.push((*first, next, reason.clone())),
                None => {
                    let most = len
                        .unwrap_or(segment_cap)
                        .saturating_sub(SEGMENT_HEADER_LEN)
                        / FRAME_HEADER_LEN;
                    let reason = format!(
                        "{reason}; the last segment: at most {most} records lost, whose \
                         offsets are not reused"
                    );
                    lost.push((*first, first + most, reason));
                }
            },
            _ => {} // a segment of this log, damaged: its records are a counted hole
        }
    }
    for (first, reason, prev, prev_end) in strays {
        let path = segment_path(dir, first);
        let moved = quarantine_as(dir, &path, "junk-")
            .map_err(|e| OpenError::io("quarantining", &path, e))?;
        let reason = format!(
            "{reason}; and segment {prev} before it ends at {prev_end}, not {first}: \
             not a segment of this log"
        );
        tracing::warn!(
            segment = %path.display(),
            moved_to = %moved.display(),
            reason = %reason,
            "quarantined a stray file in the WAL directory {}: {reason}; no records lost, \
             moved to {}",
            path.display(),
            moved.display()
        );
        report.quarantined.push(QuarantinedSegment {
            path: moved,
            from: first,
            to: first,
            reason,
        });
        firsts.retain(|&f| f != first);
    }
    for (first, to, reason) in lost {
        let path = segment_path(dir, first);
        let moved = quarantine(dir, &path).map_err(|e| OpenError::io("quarantining", &path, e))?;
        let q = QuarantinedSegment {
            path: moved,
            from: first,
            to,
            reason,
        };
        warn_quarantined(&path, &q);
        report.quarantined.push(q);
        holes.push(Hole { from: first, to });
        firsts.retain(|&f| f != first);
    }
    Ok(holes)
}
