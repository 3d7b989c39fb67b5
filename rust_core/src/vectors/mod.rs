//! The vector side of the index: a set of immutable segments named by the manifest.
//!
//! Readers map the segments the current manifest lists and search them all, keeping a
//! hit only if the document in Tantivy still carries the stamp the segment recorded for
//! it. Writers add one segment per commit that brings vectors and merge small segments
//! so searches touch few graphs.

pub mod segment;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

pub use segment::{Entry, Found, Segment};

use crate::error::Result;
use crate::manifest::Manifest;

/// Directory (inside the index directory) holding vector segments.
pub const DIR_NAME: &str = "vectors";

/// Maps the segments `manifest` lists, reusing already-open ones from `previous`.
pub fn open_segments(
    dir: &Path,
    manifest: &Manifest,
    previous: &[Arc<Segment>],
    expansion: usize,
) -> Result<Vec<Arc<Segment>>> {
    let known: HashMap<u64, &Arc<Segment>> = previous.iter().map(|s| (s.id, s)).collect();
    manifest
        .segments
        .iter()
        .map(|m| match known.get(&m.id) {
            Some(s) => Ok(Arc::clone(s)),
            None => Segment::open(dir, m.id, expansion).map(Arc::new),
        })
        .collect()
}

/// The vector `key` had when it was stamped `stamp`, looking at newest segments first.
pub fn stamped_vector(
    segments: &[Arc<Segment>],
    key: u64,
    stamp: u64,
    dim: usize,
) -> Result<Option<Vec<f32>>> {
    for seg in segments.iter().rev() {
        if seg.stamp_of(key) == Some(stamp) {
            return seg.get(key, dim);
        }
    }
    Ok(None)
}

/// Cosine similarity of two vectors (robust to the scale of dequantised vectors).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

/// Bounds concurrent graph searches: usearch keeps one scratch context per hardware
/// thread and fails a search when none is free.
pub struct SearchSlots {
    free: Mutex<usize>,
    released: Condvar,
}

/// A held search slot.
pub struct SlotGuard<'a>(&'a SearchSlots);

impl SearchSlots {
    /// As many slots as usearch has thread contexts by default.
    pub fn new() -> SearchSlots {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        SearchSlots {
            free: Mutex::new(n),
            released: Condvar::new(),
        }
    }

    /// Waits for a free slot.
    pub fn acquire(&self) -> SlotGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.released.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        SlotGuard(self)
    }
}

impl Default for SearchSlots {
    fn default() -> Self {
        SearchSlots::new()
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.released.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CoreError;
    use crate::manifest::{IndexConfig, Quantization, SegmentMeta};

    fn config(q: Quantization) -> IndexConfig {
        IndexConfig {
            format: IndexConfig::FORMAT,
            dimensions: 8,
            quantization: q,
            connectivity: 16,
            expansion_add: 64,
        }
    }

    fn unit(seed: u64) -> Vec<f32> {
        let mut state = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let mut v: Vec<f32> = (0..8)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 33) % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    #[test]
    fn a_written_segment_maps_back_with_keys_stamps_and_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let vecs: Vec<Vec<f32>> = (1..=50).map(unit).collect();
        let entries = numbered(&vecs, 100, 7);
        let f32s = config(Quantization::F32);
        let meta = Segment::write(dir.path(), 3, None, &entries, &f32s, None).unwrap();
        assert_eq!(meta, Some(SegmentMeta { id: 3, count: 50 }));
        let seg = Segment::open(dir.path(), 3, 64).unwrap();
        assert_eq!(seg.len(), 50);
        assert_eq!(seg.stamp_of(100), Some(7));
        assert_eq!(seg.stamp_of(99), None);
        let hits = seg.search(&vecs[10], 3, 0).unwrap();
        assert_eq!(hits[0].0, 110);
        assert!((hits[0].1 - 1.0).abs() < 1e-4);
        assert!(hits.iter().all(|h| h.2 == 7));
        let back = seg.get(110, 8).unwrap().unwrap();
        assert!(cosine(&back, &vecs[10]) > 0.9999);
        let only_even = seg.filtered_search(&vecs[11], 5, |k| k % 2 == 0).unwrap();
        assert!(only_even
            .iter()
            .all(|&(k, _, stamp)| k % 2 == 0 && stamp == 7));
    }

    /// `vecs` as entries keyed `first`, `first + 1`, ... and stamped `stamp`.
    fn numbered(vecs: &[Vec<f32>], first: u64, stamp: u64) -> Vec<Entry<'_>> {
        vecs.iter()
            .enumerate()
            .map(|(i, v)| Entry {
                key: first + i as u64,
                stamp,
                vector: v,
            })
            .collect()
    }

    #[test]
    fn a_key_file_with_near_copy_groups_is_reported_as_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let vecs: Vec<Vec<f32>> = (1..=12).map(unit).collect();
        Segment::write(
            dir.path(),
            6,
            None,
            &numbered(&vecs, 0, 1),
            &config(Quantization::I8),
            None,
        )
        .unwrap();
        let (_, keys) = segment::paths(dir.path(), 6);
        let mut bytes = std::fs::read(&keys).unwrap();
        bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(&keys, &bytes).unwrap();
        let err = Segment::open(dir.path(), 6, 64).err().unwrap();
        assert!(matches!(err, CoreError::IndexCorrupt { .. }), "{err}");
        assert!(err.to_string().contains("rebuild"), "{err}");
    }

    #[test]
    fn an_opened_segment_is_searched_after_a_writer_deleted_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let vecs: Vec<Vec<f32>> = (1..=40).map(unit).collect();
        let entries = numbered(&vecs, 0, 1);
        let i8s = config(Quantization::I8);
        Segment::write(dir.path(), 9, None, &entries, &i8s, None).unwrap();
        let seg = Segment::open(dir.path(), 9, 64).unwrap();
        // The graph is viewed lazily, on the first search: after the files are gone
        // (a merge in another process collected them) the mapping still serves it.
        let (graph, keys) = segment::paths(dir.path(), 9);
        std::fs::remove_file(graph).unwrap();
        std::fs::remove_file(keys).unwrap();
        assert_eq!(seg.search(&vecs[5], 1, 0).unwrap()[0].0, 5);
        assert!(cosine(&seg.get(7, 8).unwrap().unwrap(), &vecs[7]) > 0.99);
        assert!(matches!(
            Segment::open(dir.path(), 9, 64),
            Err(CoreError::Io { .. })
        ));
    }

    #[test]
    fn a_truncated_key_file_is_reported_as_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let v = unit(1);
        Segment::write(
            dir.path(),
            1,
            None,
            &[Entry {
                key: 1,
                stamp: 1,
                vector: &v,
            }],
            &config(Quantization::I8),
            None,
        )
        .unwrap();
        let (_, keys) = segment::paths(dir.path(), 1);
        let bytes = std::fs::read(&keys).unwrap();
        std::fs::write(&keys, &bytes[..bytes.len() - 3]).unwrap();
        assert!(matches!(
            Segment::open(dir.path(), 1, 64),
            Err(crate::error::CoreError::IndexCorrupt { .. })
        ));
    }
}
