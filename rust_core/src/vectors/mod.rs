//! The vector side of the index: a set of immutable segments named by the manifest.
//!
//! Readers map the segments the current manifest lists and search them all, keeping a
//! hit only if the document in Tantivy still carries the stamp the segment recorded for
//! it. Writers add one segment per commit that brings vectors and merge small segments
//! so searches touch few graphs.

pub mod groups;
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

    fn normalised(mut v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    /// `v` moved by up to `by` in every coordinate (deterministic in `seed`).
    fn near(v: &[f32], seed: u64, by: f32) -> Vec<f32> {
        let noise = unit(seed ^ 0x5eed);
        normalised(v.iter().zip(noise).map(|(x, e)| x + by * e).collect())
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
        let meta = Segment::write(dir.path(), 3, &entries, &config(Quantization::F32)).unwrap();
        assert_eq!(meta, SegmentMeta { id: 3, count: 50 });
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

    /// Keys of the `k` vectors nearest to `q` by exact cosine, among those `allow` accepts.
    fn exact_top(all: &[(u64, Vec<f32>)], q: &[f32], k: usize, allow: fn(u64) -> bool) -> Vec<u64> {
        let mut scored: Vec<(f32, u64)> = all
            .iter()
            .filter(|(key, _)| allow(*key))
            .map(|(key, v)| (cosine(q, v), *key))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.into_iter().take(k).map(|(_, key)| key).collect()
    }

    #[test]
    fn near_copies_share_a_group_and_every_copy_is_scored_on_its_own() {
        // 60 texts with 6 near-copies each (cosine ~0.99 to their original).
        let all: Vec<(u64, Vec<f32>)> = (0..60u64)
            .flat_map(|b| {
                let base = unit(1000 + b);
                (0..6u64).map(move |c| (b * 10 + c, near(&base, b * 10 + c, 0.04)))
            })
            .collect();
        let odd_copy = |key: u64| key % 2 == 1;
        for q in [Quantization::F32, Quantization::I8] {
            let dir = tempfile::tempdir().unwrap();
            let entries: Vec<Entry> = all
                .iter()
                .map(|(key, v)| Entry {
                    key: *key,
                    stamp: 4,
                    vector: v,
                })
                .collect();
            Segment::write(dir.path(), 1, &entries, &config(q)).unwrap();
            let seg = Segment::open(dir.path(), 1, 64).unwrap();
            assert_eq!(seg.len(), 360);
            assert!(
                seg.graph_nodes() < 120,
                "{q:?}: {} groups",
                seg.graph_nodes()
            );
            let (mut same_order, mut same_filtered) = (0, 0);
            for (key, v) in &all {
                // Each copy is found as itself, not as its group's representative.
                let hits = seg.search(v, 6, 0).unwrap();
                assert_eq!(hits[0].0, *key, "{q:?}");
                assert!(hits[0].1 > 0.99, "{q:?}: {}", hits[0].1);
                assert!(hits.iter().all(|h| h.2 == 4), "{q:?}");
                // ... and the six nearest are the six copies of its text.
                let mut keys: Vec<u64> = hits.iter().map(|h| h.0).collect();
                same_order += usize::from(keys == exact_top(&all, v, 6, |_| true));
                keys.sort_unstable();
                let copies: Vec<u64> = (0..6).map(|c| key / 10 * 10 + c).collect();
                assert_eq!(keys, copies, "{q:?}");
                let only_odd = seg.filtered_search(v, 3, odd_copy).unwrap();
                let keys: Vec<u64> = only_odd.iter().map(|h| h.0).collect();
                assert!(
                    keys.iter().all(|&k| odd_copy(k) && k / 10 == key / 10),
                    "{q:?}"
                );
                same_filtered += usize::from(keys == exact_top(&all, v, 3, odd_copy));
                assert_eq!(seg.stamp_of(*key), Some(4));
                let back = seg.get(*key, 8).unwrap().unwrap();
                assert!(cosine(&back, v) > 0.995, "{q:?}: {}", cosine(&back, v));
            }
            // Copies differ by a few thousandths, which i8 does not keep apart.
            if q == Quantization::F32 {
                assert!(
                    same_order >= 350,
                    "top 6 in exact order for {same_order} of 360"
                );
                assert!(same_filtered >= 350, "{same_filtered} of 360");
            }
            assert_eq!(seg.get(7, 8).unwrap(), None);
        }
    }

    #[test]
    fn distinct_vectors_each_get_a_node() {
        let dir = tempfile::tempdir().unwrap();
        let vecs: Vec<Vec<f32>> = (1..=200).map(unit).collect();
        let entries = numbered(&vecs, 0, 1);
        Segment::write(dir.path(), 2, &entries, &config(Quantization::I8)).unwrap();
        let seg = Segment::open(dir.path(), 2, 64).unwrap();
        // Random 8-dimensional vectors are rarely 0.95 alike: nearly one group each.
        assert!(seg.graph_nodes() > 190, "{}", seg.graph_nodes());
        let found = (0..200)
            .filter(|&i| seg.search(&vecs[i], 1, 0).unwrap()[0].0 == i as u64)
            .count();
        assert!(found >= 198, "{found}");
    }

    #[test]
    fn a_segment_written_before_groups_is_still_searched() {
        use usearch::{Index as HnswIndex, IndexOptions, MetricKind, ScalarKind};
        let dir = tempfile::tempdir().unwrap();
        let vecs: Vec<Vec<f32>> = (1..=30).map(unit).collect();
        let hnsw = HnswIndex::new(&IndexOptions {
            dimensions: 8,
            metric: MetricKind::Cos,
            quantization: ScalarKind::I8,
            connectivity: 16,
            expansion_add: 64,
            expansion_search: 64,
            multi: false,
        })
        .unwrap();
        hnsw.reserve(30).unwrap();
        for (i, v) in vecs.iter().enumerate() {
            hnsw.add(500 + i as u64, v).unwrap();
        }
        let (graph, keys) = segment::paths(dir.path(), 5);
        hnsw.save(graph.to_str().unwrap()).unwrap();
        // Version 1 key file: the (key, stamp) table and nothing after it.
        let mut bytes = b"BTVK".to_vec();
        bytes.extend(1u32.to_le_bytes());
        bytes.extend(30u64.to_le_bytes());
        for i in 0..30u64 {
            bytes.extend((500 + i).to_le_bytes());
            bytes.extend(2u64.to_le_bytes());
        }
        std::fs::write(&keys, &bytes).unwrap();
        let seg = Segment::open(dir.path(), 5, 64).unwrap();
        assert_eq!(seg.graph_nodes(), 30);
        assert_eq!(seg.search(&vecs[3], 1, 0).unwrap()[0].0, 503);
        assert!(cosine(&seg.get(507, 8).unwrap().unwrap(), &vecs[7]) > 0.99);
        let odd = seg.filtered_search(&vecs[4], 3, |k| k % 2 == 1).unwrap();
        assert!(odd.iter().all(|(k, _, _)| k % 2 == 1) && odd.len() == 3);
        // A version 1 file with bytes after its table is not taken for one.
        bytes.extend([0u8; 16]);
        std::fs::write(&keys, &bytes).unwrap();
        assert!(matches!(
            Segment::open(dir.path(), 5, 64),
            Err(CoreError::IndexCorrupt { .. })
        ));
    }

    #[test]
    fn damaged_groups_are_reported_as_corrupt_not_panicked_on() {
        let dir = tempfile::tempdir().unwrap();
        let base = unit(3);
        let vecs: Vec<Vec<f32>> = (0..12).map(|i| near(&base, i, 0.02)).collect();
        let entries = numbered(&vecs, 0, 1);
        Segment::write(dir.path(), 6, &entries, &config(Quantization::I8)).unwrap();
        let (_, keys) = segment::paths(dir.path(), 6);
        let mut bytes = std::fs::read(&keys).unwrap();
        // The end offset of group 0, after the header and 12 (key, stamp) pairs.
        let at = 16 + 12 * 16 + 16 + 4;
        bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&keys, &bytes).unwrap();
        let seg = Segment::open(dir.path(), 6, 64).unwrap();
        assert!(matches!(
            seg.search(&vecs[0], 3, 0),
            Err(CoreError::IndexCorrupt { .. })
        ));
    }

    #[test]
    fn an_opened_segment_is_searched_after_a_writer_deleted_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let vecs: Vec<Vec<f32>> = (1..=40).map(unit).collect();
        let entries = numbered(&vecs, 0, 1);
        Segment::write(dir.path(), 9, &entries, &config(Quantization::I8)).unwrap();
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
            &[Entry {
                key: 1,
                stamp: 1,
                vector: &v,
            }],
            &config(Quantization::I8),
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
