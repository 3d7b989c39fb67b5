//! One immutable vector segment: a usearch HNSW file plus a sorted `(key, stamp)` sidecar.
//!
//! A segment is written once (temporary name, fsync, rename) and then only memory-mapped
//! (`view`), so any number of processes can read it while a writer publishes newer
//! segments. The sidecar records which commit wrote each vector; a hit counts only while
//! the document in Tantivy still carries the same stamp, which is how replaced and deleted
//! vectors disappear without rewriting any file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use usearch::{Index as HnswIndex, IndexOptions, MetricKind, ScalarKind};

use crate::error::{CoreError, Result};
use crate::fsutil;
use crate::manifest::{IndexConfig, Quantization, SegmentMeta};

const MAGIC: &[u8; 4] = b"BTVK";
const HEADER: usize = 16;
const ENTRY: usize = 16;

/// A vector to be written: document id, the stamp of the commit that computed it, and
/// the unit-length vector.
pub struct Entry<'a> {
    /// Document id (the usearch key).
    pub key: u64,
    /// Commit stamp.
    pub stamp: u64,
    /// The vector.
    pub vector: &'a [f32],
}

/// A published, memory-mapped segment.
pub struct Segment {
    /// Segment id.
    pub id: u64,
    hnsw: HnswIndex,
    keys: Mmap,
    count: usize,
}

/// Paths of a segment's two files.
pub fn paths(dir: &Path, id: u64) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("seg-{id:012}.usearch")),
        dir.join(format!("seg-{id:012}.keys")),
    )
}

fn options(config: &IndexConfig) -> IndexOptions {
    IndexOptions {
        dimensions: config.dimensions,
        metric: MetricKind::Cos,
        quantization: match config.quantization {
            Quantization::I8 => ScalarKind::I8,
            Quantization::F16 => ScalarKind::F16,
            Quantization::F32 => ScalarKind::F32,
        },
        connectivity: config.connectivity,
        expansion_add: config.expansion_add,
        expansion_search: 64,
        multi: false,
    }
}

impl Segment {
    /// Builds segment `id` from `entries` (keys must be distinct) and publishes its files.
    pub fn write(
        dir: &Path,
        id: u64,
        entries: &[Entry<'_>],
        config: &IndexConfig,
    ) -> Result<SegmentMeta> {
        let (graph_path, keys_path) = paths(dir, id);
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        let hnsw = HnswIndex::new(&options(config))?;
        hnsw.reserve_capacity_and_threads(entries.len().max(1), threads)?;
        let chunk = entries.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let workers: Vec<_> = entries
                .chunks(chunk)
                .map(|part| s.spawn(|| part.iter().try_for_each(|e| hnsw.add(e.key, e.vector))))
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().expect("vector insert thread panicked"))
        })?;
        let tmp = fsutil::tmp_path(&graph_path);
        hnsw.save(
            tmp.to_str()
                .ok_or_else(|| CoreError::invalid("index path is not UTF-8"))?,
        )?;
        fsutil::sync_file(&tmp)?;
        fsutil::publish(&tmp, &graph_path)?;

        let mut sorted: Vec<(u64, u64)> = entries.iter().map(|e| (e.key, e.stamp)).collect();
        sorted.sort_unstable();
        let tmp = fsutil::tmp_path(&keys_path);
        let file = File::create(&tmp).map_err(|e| CoreError::io(&tmp, e))?;
        let mut w = BufWriter::new(file);
        let write = |w: &mut BufWriter<File>| -> std::io::Result<()> {
            w.write_all(MAGIC)?;
            w.write_all(&1u32.to_le_bytes())?;
            w.write_all(&(sorted.len() as u64).to_le_bytes())?;
            for (k, s) in &sorted {
                w.write_all(&k.to_le_bytes())?;
                w.write_all(&s.to_le_bytes())?;
            }
            w.flush()?;
            w.get_ref().sync_all()
        };
        write(&mut w).map_err(|e| CoreError::io(&tmp, e))?;
        fsutil::publish(&tmp, &keys_path)?;
        Ok(SegmentMeta {
            id,
            count: entries.len() as u64,
        })
    }

    /// Memory-maps a published segment.
    pub fn open(dir: &Path, id: u64, expansion_search: usize) -> Result<Segment> {
        let (graph_path, keys_path) = paths(dir, id);
        let corrupt = |reason: String| CoreError::IndexCorrupt {
            path: keys_path.clone(),
            reason,
        };
        let file = File::open(&keys_path).map_err(|e| CoreError::io(&keys_path, e))?;
        // SAFETY: segment files are never modified after they are published.
        let keys = unsafe { Mmap::map(&file) }.map_err(|e| CoreError::io(&keys_path, e))?;
        if keys.len() < HEADER || &keys[..4] != MAGIC {
            return Err(corrupt("not a Backtrail vector key file".into()));
        }
        let count = u64::from_le_bytes(keys[8..16].try_into().expect("8 bytes")) as usize;
        if keys.len() != HEADER + count * ENTRY {
            return Err(corrupt(format!(
                "expected {count} entries, file has {} bytes",
                keys.len()
            )));
        }
        let path = graph_path
            .to_str()
            .ok_or_else(|| CoreError::invalid("index path is not UTF-8"))?;
        if !graph_path.exists() {
            return Err(CoreError::io(
                &graph_path,
                std::io::Error::new(std::io::ErrorKind::NotFound, "vector segment missing"),
            ));
        }
        let hnsw = HnswIndex::restore_view(path)?;
        hnsw.change_expansion_search(expansion_search);
        Ok(Segment {
            id,
            hnsw,
            keys,
            count,
        })
    }

    /// Number of vectors in the segment.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True if the segment holds no vectors.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn entry(&self, i: usize) -> (u64, u64) {
        let at = HEADER + i * ENTRY;
        let k = u64::from_le_bytes(self.keys[at..at + 8].try_into().expect("8 bytes"));
        let s = u64::from_le_bytes(self.keys[at + 8..at + 16].try_into().expect("8 bytes"));
        (k, s)
    }

    /// The stamp of `key`'s vector in this segment, if it has one.
    pub fn stamp_of(&self, key: u64) -> Option<u64> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (k, s) = self.entry(mid);
            match k.cmp(&key) {
                std::cmp::Ordering::Equal => return Some(s),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        None
    }

    /// Every `(key, stamp)` pair, sorted by key.
    pub fn entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.count).map(|i| self.entry(i))
    }

    /// Approximate nearest neighbours: `(key, cosine similarity)`, best first.
    pub fn search(&self, query: &[f32], count: usize, expansion: usize) -> Result<Vec<(u64, f32)>> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        if expansion > 0 && expansion != self.hnsw.expansion_search() {
            self.hnsw.change_expansion_search(expansion);
        }
        let m = self.hnsw.search(query, count)?;
        Ok(m.keys
            .into_iter()
            .zip(m.distances)
            .map(|(k, d)| (k, 1.0 - d))
            .collect())
    }

    /// Like [`Segment::search`], visiting only keys `allow` accepts.
    pub fn filtered_search<F: Fn(u64) -> bool>(
        &self,
        query: &[f32],
        count: usize,
        allow: F,
    ) -> Result<Vec<(u64, f32)>> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        let m = self.hnsw.filtered_search(query, count, allow)?;
        Ok(m.keys
            .into_iter()
            .zip(m.distances)
            .map(|(k, d)| (k, 1.0 - d))
            .collect())
    }

    /// The stored (dequantised) vector of `key`.
    pub fn get(&self, key: u64, dim: usize) -> Result<Option<Vec<f32>>> {
        let mut buf = vec![0f32; dim];
        let found = self.hnsw.get(key, &mut buf)?;
        Ok((found > 0).then_some(buf))
    }
}
