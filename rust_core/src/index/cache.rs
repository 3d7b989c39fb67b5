//! Per-segment data a reader needs for every candidate: the fast-field columns, and a
//! map from document id to Tantivy's doc id (built on first use). Tantivy segments are
//! immutable, so these are cached by segment id for the life of the process.

use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use tantivy::columnar::Column;
use tantivy::fastfield::AliveBitSet;
use tantivy::{DocId, SegmentReader};

use crate::error::Result;

/// Columns and id map of one Tantivy segment.
pub struct SegmentCache {
    /// Document ids.
    pub id: Column<u64>,
    /// Kind codes.
    pub kind: Column<u64>,
    /// Parents.
    pub parent: Column<u64>,
    /// Last seen.
    pub last_seen: Column<i64>,
    /// Visits.
    pub visits: Column<u64>,
    /// Vector stamps.
    pub vstamp: Column<u64>,
    ids: OnceLock<FxHashMap<u64, DocId>>,
    alive_at_build: Option<AliveBitSet>,
    max_doc: DocId,
}

impl SegmentCache {
    /// Opens the columns of `reader`.
    pub fn new(reader: &SegmentReader) -> Result<SegmentCache> {
        let ff = reader.fast_fields();
        Ok(SegmentCache {
            id: ff.u64("id")?,
            kind: ff.u64("kind")?,
            parent: ff.u64("parent")?,
            last_seen: ff.i64("last_seen")?,
            visits: ff.u64("visits")?,
            vstamp: ff.u64("vstamp")?,
            ids: OnceLock::new(),
            alive_at_build: reader.alive_bitset().cloned(),
            max_doc: reader.max_doc(),
        })
    }

    /// The doc id holding document `id` (the caller checks it is not deleted).
    pub fn doc_of(&self, id: u64) -> Option<DocId> {
        self.ids
            .get_or_init(|| {
                let mut map =
                    FxHashMap::with_capacity_and_hasher(self.max_doc as usize, Default::default());
                for doc in 0..self.max_doc {
                    // Deletes only accumulate, so a doc deleted now stays deleted; skipping
                    // them keeps a re-added id in the same segment pointing at its live copy.
                    if self.alive_at_build.as_ref().is_none_or(|a| a.is_alive(doc)) {
                        if let Some(v) = self.id.first(doc) {
                            map.insert(v, doc);
                        }
                    }
                }
                map
            })
            .get(&id)
            .copied()
    }

    /// Reads one u64 column.
    pub fn u64_at(col: &Column<u64>, doc: DocId) -> u64 {
        col.first(doc).unwrap_or(0)
    }
}
