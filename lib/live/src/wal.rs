//! The write-ahead log: one file of framed records, appended and flushed before a write is
//! acknowledged.
//!
//! A record is `len (u32 LE) ‖ crc32(payload) (u32 LE) ‖ payload`, the payload a bincode
//! [`Record`]. Reading stops at the first record that is cut short or whose checksum
//! differs: a crash can only cut the last record (appends are sequential), and that record
//! was never acknowledged, so the file is truncated there.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sextant_core::build::{EncodedChunk, EncodedDocument};
use sextant_core::corpus::legacy::DocumentV6;
use sextant_core::corpus::Chunk;

use crate::error::{Error, Result};

/// The largest record read back (a record claiming more is damage, not a record).
const MAX_RECORD: u32 = 256 << 20;

/// One logged write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Its sequence number: 1, 2, ... across the index's whole life.
    pub seq: u64,
    /// What it does.
    pub op: Op,
}

/// A logged operation. The order of the variants is the log's format (bincode writes a
/// variant's number): a new kind of record is added at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// A put as logs written before document pages hold it: read from such logs (and
    /// replayed as a [`Op::Put`] of a document without pages), never written.
    PutWithoutPages(Box<EncodedDocumentV6>),
    /// The id of a deleted document.
    Delete(String),
    /// The document, cut and encoded (so replaying the log encodes nothing).
    Put(Box<EncodedDocument>),
}

/// An [`EncodedDocument`] whose document has the layout of logs before pages.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EncodedDocumentV6 {
    document: DocumentV6,
    chunks: Vec<Chunk>,
    vectors: Vec<EncodedChunk>,
}

impl PartialEq for EncodedDocumentV6 {
    fn eq(&self, other: &Self) -> bool {
        bincode::serialize(self).ok() == bincode::serialize(other).ok()
    }
}

impl From<EncodedDocumentV6> for EncodedDocument {
    fn from(d: EncodedDocumentV6) -> Self {
        EncodedDocument { document: d.document.into(), chunks: d.chunks, vectors: d.vectors }
    }
}

impl From<&EncodedDocument> for EncodedDocumentV6 {
    /// The old layout of `d` (its pages dropped), to write an old log in tests.
    fn from(d: &EncodedDocument) -> Self {
        EncodedDocumentV6 { document: (&d.document).into(), chunks: d.chunks.clone(), vectors: d.vectors.clone() }
    }
}

/// The log file, open for appends.
pub struct Wal {
    path: PathBuf,
    file: File,
}

/// Flushes the directory `dir` itself, so a file created or renamed in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io(dir, e))
}

fn frame(record: &Record) -> Result<Vec<u8>> {
    let payload = bincode::serialize(record).map_err(|e| Error::Format(format!("encoding a log record: {e}")))?;
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// The whole records at the start of `bytes`, and how many bytes they take.
fn parse(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= 8 {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        if len > MAX_RECORD || bytes.len() - at - 8 < len as usize {
            break;
        }
        let payload = &bytes[at + 8..at + 8 + len as usize];
        if crc32fast::hash(payload) != crc {
            break;
        }
        match bincode::deserialize::<Record>(payload) {
            Ok(r) => records.push(r),
            Err(_) => break,
        }
        at += 8 + len as usize;
    }
    (records, at)
}

impl Wal {
    /// Opens (or creates) the log at `path` and reads its records; a damaged tail is cut
    /// off the file, and reported as the number of bytes dropped.
    pub fn open(path: &Path) -> Result<(Wal, Vec<Record>, usize)> {
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
        let (records, good) = parse(&bytes);
        let dropped = bytes.len() - good;
        if dropped > 0 {
            file.set_len(good as u64).and_then(|_| file.sync_all()).map_err(|e| Error::io(path, e))?;
        }
        if let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
        Ok((Wal { path: path.to_path_buf(), file }, records, dropped))
    }

    /// Appends `record` and flushes it to disk: when this returns, the write survives a crash.
    pub fn append(&mut self, record: &Record) -> Result<()> {
        self.append_all(std::slice::from_ref(record))
    }

    /// Appends `records` in one write and one flush: when this returns, every one of them
    /// survives a crash. A crash before it returns may keep a prefix of them (each record is
    /// framed, so a record cut short is dropped on the next open, never half-read).
    pub fn append_all(&mut self, records: &[Record]) -> Result<()> {
        let mut bytes = Vec::new();
        for r in records {
            bytes.extend(frame(r)?);
        }
        self.file.write_all(&bytes).and_then(|_| self.file.sync_data()).map_err(|e| Error::io(&self.path, e))
    }

    /// Replaces the log with `records` (those a compaction did not fold in): written to a
    /// new file, flushed, then renamed over the log.
    pub fn rewrite(&mut self, records: &[Record]) -> Result<()> {
        let tmp = self.path.with_extension("log.tmp");
        let mut bytes = Vec::new();
        for r in records {
            bytes.extend(frame(r)?);
        }
        let mut f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(&bytes).and_then(|_| f.sync_all()).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        if let Some(dir) = self.path.parent() {
            sync_dir(dir)?;
        }
        self.file = OpenOptions::new().append(true).open(&self.path).map_err(|e| Error::io(&self.path, e))?;
        Ok(())
    }

    /// Every record in the file now.
    pub fn records(&self) -> Result<Vec<Record>> {
        let bytes = std::fs::read(&self.path).map_err(|e| Error::io(&self.path, e))?;
        Ok(parse(&bytes).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(seq: u64, id: &str) -> Record {
        Record { seq, op: Op::Delete(id.into()) }
    }

    #[test]
    fn records_survive_reopening_and_a_cut_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let (mut wal, records, dropped) = Wal::open(&path).unwrap();
        assert_eq!((records.len(), dropped), (0, 0));
        for i in 1..=3 {
            wal.append(&delete(i, &format!("d{i}"))).unwrap();
        }
        drop(wal);
        let full = std::fs::read(&path).unwrap();
        // Cut the file at every length: the whole records before the cut come back, the
        // rest is dropped from the file, and appending afterwards works.
        for cut in 0..full.len() {
            std::fs::write(&path, &full[..cut]).unwrap();
            let (mut wal, records, dropped) = Wal::open(&path).unwrap();
            let whole = parse(&full[..cut]).0.len();
            assert_eq!(records.len(), whole, "cut at {cut}");
            assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, cut - dropped);
            wal.append(&delete(9, "after")).unwrap();
            assert_eq!(wal.records().unwrap().last(), Some(&delete(9, "after")));
        }
        // A flipped bit ends the log there.
        let mut bad = full.clone();
        bad[full.len() - 2] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert_eq!(Wal::open(&path).unwrap().1, vec![delete(1, "d1"), delete(2, "d2")]);
    }

    #[test]
    fn a_rewrite_keeps_only_the_records_given() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let (mut wal, _, _) = Wal::open(&path).unwrap();
        for i in 1..=4 {
            wal.append(&delete(i, "x")).unwrap();
        }
        wal.rewrite(&[delete(4, "x")]).unwrap();
        wal.append(&delete(5, "y")).unwrap();
        assert_eq!(Wal::open(&path).unwrap().1, vec![delete(4, "x"), delete(5, "y")]);
    }
}
