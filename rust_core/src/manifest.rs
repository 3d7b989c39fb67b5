//! What a commit publishes besides Tantivy's own segments: the caller's watermark and the
//! list of live vector segments. It travels as Tantivy's commit payload, so text and
//! vectors change in one atomic step (meta.json's rename) and every process reads the
//! same state.
//!
//! The index's fixed settings (vector quantization and graph shape) are written once, at
//! creation, to `backtrail-index.json`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, Result};

/// Published state of the vector side plus the caller's watermark.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Opaque string the caller attached to the latest commit (e.g. a ledger sequence).
    pub watermark: Option<String>,
    /// Stamp the next commit will give to the vectors it writes (stamps start at 1).
    pub next_stamp: u64,
    /// Live vector segments, oldest first.
    pub segments: Vec<SegmentMeta>,
    /// Vector stamps below this belong to vectors dropped by a
    /// [`clear_vectors`](crate::Index::stage) (`Op::ClearVectors`): a document still
    /// carrying one has no vector. 0 in an index never cleared.
    #[serde(default)]
    pub vector_floor: u64,
}

/// One immutable vector segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentMeta {
    /// Segment id, unique for the life of the index; names the files.
    pub id: u64,
    /// Number of vectors in it (live or superseded).
    pub count: u64,
}

impl Manifest {
    /// Parses a commit payload; an absent payload is an empty manifest.
    pub fn from_payload(payload: Option<&str>, dir: &Path) -> Result<Manifest> {
        match payload {
            None | Some("") => Ok(Manifest {
                next_stamp: 1,
                ..Manifest::default()
            }),
            Some(p) => serde_json::from_str(p).map_err(|e| CoreError::IndexCorrupt {
                path: dir.to_path_buf(),
                reason: format!("commit payload is not a Backtrail manifest: {e}"),
            }),
        }
    }

    /// The payload to commit.
    pub fn to_payload(&self) -> String {
        serde_json::to_string(self).expect("manifest serialises")
    }

    /// True when a document carrying vector stamp `vstamp` has a vector (0: never had one;
    /// below [`Manifest::vector_floor`]: dropped).
    pub fn live_stamp(&self, vstamp: u64) -> bool {
        vstamp > 0 && vstamp >= self.vector_floor
    }

    /// Takes a fresh stamp.
    pub fn take_stamp(&mut self) -> u64 {
        let s = self.next_stamp.max(1);
        self.next_stamp = s + 1;
        s
    }
}

/// Vector precision on disk and in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantization {
    /// One byte per dimension.
    I8,
    /// Two bytes per dimension.
    F16,
    /// Four bytes per dimension.
    F32,
}

impl Quantization {
    /// Parses `i8`, `f16` or `f32`.
    pub fn parse(s: &str) -> Result<Quantization> {
        match s {
            "i8" => Ok(Quantization::I8),
            "f16" => Ok(Quantization::F16),
            "f32" => Ok(Quantization::F32),
            other => Err(CoreError::invalid(format!(
                "unknown quantization {other:?} (expected i8, f16 or f32)"
            ))),
        }
    }
}

/// Settings fixed when the index is created.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IndexConfig {
    /// Format version of this directory layout.
    pub format: u32,
    /// Embedding dimensions.
    pub dimensions: usize,
    /// Vector precision.
    pub quantization: Quantization,
    /// HNSW graph degree.
    pub connectivity: usize,
    /// HNSW expansion while building.
    pub expansion_add: usize,
}

impl IndexConfig {
    /// File name inside the index directory.
    pub const FILE_NAME: &'static str = "backtrail-index.json";
    /// Current directory format. Raised whenever the schema or the text analysis changes
    /// (format 2 stems words by script, format 3 Latin-script words by the page's
    /// language, format 4 adds the section field), so an index analysed the old way is
    /// reported corrupt and rebuilt rather than searched with terms it does not hold.
    pub const FORMAT: u32 = 4;

    /// Reads the settings of an existing index.
    pub fn load(dir: &Path) -> Result<IndexConfig> {
        let path = dir.join(Self::FILE_NAME);
        let text = std::fs::read_to_string(&path).map_err(|e| CoreError::io(&path, e))?;
        let config: IndexConfig =
            serde_json::from_str(&text).map_err(|e| CoreError::IndexCorrupt {
                path: dir.to_path_buf(),
                reason: format!("{}: {e}", Self::FILE_NAME),
            })?;
        if config.format != Self::FORMAT {
            return Err(CoreError::IndexCorrupt {
                path: dir.to_path_buf(),
                reason: format!(
                    "index format {} is not supported (expected {})",
                    config.format,
                    Self::FORMAT
                ),
            });
        }
        Ok(config)
    }

    /// Writes the settings atomically (temp file, fsync, rename).
    pub fn store(&self, dir: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("config serialises");
        crate::fsutil::write_atomic(&dir.join(Self::FILE_NAME), text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_payload_is_an_empty_manifest_starting_at_stamp_one() {
        let m = Manifest::from_payload(None, Path::new("/x")).unwrap();
        assert_eq!(m.next_stamp, 1);
        assert!(m.segments.is_empty());
    }

    #[test]
    fn a_manifest_written_before_floors_reads_with_floor_zero() {
        let old = r#"{"watermark":"7","next_stamp":5,"segments":[{"id":4,"count":2}]}"#;
        let m = Manifest::from_payload(Some(old), Path::new("/x")).unwrap();
        assert_eq!(m.vector_floor, 0);
        assert!(m.live_stamp(1) && !m.live_stamp(0));
    }

    #[test]
    fn manifest_round_trips_and_foreign_payloads_are_corrupt() {
        let mut m = Manifest {
            watermark: Some("42".into()),
            next_stamp: 1,
            segments: vec![SegmentMeta { id: 3, count: 10 }],
            vector_floor: 0,
        };
        assert_eq!(m.take_stamp(), 1);
        assert_eq!(m.take_stamp(), 2);
        let back = Manifest::from_payload(Some(&m.to_payload()), Path::new("/x")).unwrap();
        assert_eq!(back, m);
        assert!(matches!(
            Manifest::from_payload(Some("not json"), Path::new("/x")),
            Err(CoreError::IndexCorrupt { .. })
        ));
    }
}
