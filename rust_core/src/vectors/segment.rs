//! One immutable vector segment: a usearch HNSW file plus a sorted `(key, stamp)` sidecar.
//!
//! A segment is written once (temporary name, fsync, rename) and then only memory-mapped
//! (`view`), so any number of processes can read it while a writer publishes newer
//! segments. The sidecar records which commit wrote each vector; a hit counts only while
//! the document in Tantivy still carries the same stamp, which is how replaced and deleted
//! vectors disappear without rewriting any file.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use memmap2::Mmap;
use usearch::{Index as HnswIndex, IndexOptions, MetricKind, ScalarKind};

use crate::error::{CoreError, Result};
use crate::fsutil;
use crate::manifest::{IndexConfig, Quantization, SegmentMeta};

/// `(key, cosine similarity, stamp)` of a vector a search found.
pub type Found = (u64, f32, u64);

const MAGIC: &[u8; 4] = b"BTVK";
const HEADER: usize = 16;
const ENTRY: usize = 16;
/// The key file's version: the `(key, stamp)` table and nothing after it.
const VERSION: u32 = 1;
/// Key files of this version held near-copy groups, which are no longer read: an index
/// holding one is reported corrupt, so the caller rebuilds it.
const GROUPED: u32 = 2;

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

/// A published, memory-mapped segment. Both files are mapped when the segment is opened
/// (which keeps them readable after a writer deletes them), but the graph is handed to
/// usearch only on the first vector search or lookup: building its view reads the key
/// table of every node, the larger part of opening a big index, and a process that only
/// runs keyword searches never pays it.
pub struct Segment {
    /// Segment id.
    pub id: u64,
    // Declared before `graph`: the view borrows that mapping and must be dropped first.
    hnsw: OnceLock<HnswIndex>,
    viewing: Mutex<()>,
    graph: Mmap,
    graph_path: PathBuf,
    expansion_search: usize,
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
    /// Builds segment `id` from `entries` (keys must be distinct) and publishes its files;
    /// with `base`, from that segment's graph with `entries` inserted (replacing its vectors
    /// of the same keys), so usearch inserts only the new vectors. With `cancel`, gives up
    /// (returning `None`, publishing nothing) soon after it is set.
    pub fn write(
        dir: &Path,
        id: u64,
        base: Option<&Segment>,
        entries: &[Entry<'_>],
        config: &IndexConfig,
        cancel: Option<&AtomicBool>,
    ) -> Result<Option<SegmentMeta>> {
        let never = AtomicBool::new(false);
        let cancel = cancel.unwrap_or(&never);
        let (graph_path, keys_path) = paths(dir, id);
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        let hnsw = HnswIndex::new(&options(config))?;
        let mut sorted: Vec<(u64, u64)> = entries.iter().map(|e| (e.key, e.stamp)).collect();
        if let Some(base) = base {
            hnsw.load_from_buffer(&base.graph)
                .map_err(|e| base.corrupt(e))?;
            hnsw.change_expansion_add(config.expansion_add);
            let replaced: HashSet<u64> = entries.iter().map(|e| e.key).collect();
            for &key in replaced.iter().filter(|&&key| hnsw.contains(key)) {
                hnsw.remove(key)?;
            }
            sorted.extend(base.entries().filter(|(key, _)| !replaced.contains(key)));
        }
        let capacity = hnsw.capacity() + entries.len(); // removed vectors keep their slots
        hnsw.reserve_capacity_and_threads(capacity.max(1), threads)?;
        let chunk = entries.len().div_ceil(threads).max(1);
        let insert = |part: &[Entry<'_>]| -> Result<()> {
            for batch in part.chunks(256) {
                if cancel.load(Ordering::Relaxed) {
                    return Ok(());
                }
                batch.iter().try_for_each(|e| hnsw.add(e.key, e.vector))?;
            }
            Ok(())
        };
        std::thread::scope(|s| {
            let workers: Vec<_> = entries
                .chunks(chunk)
                .map(|part| s.spawn(|| insert(part)))
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().expect("vector insert thread panicked"))
        })?;
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let tmp = fsutil::tmp_path(&graph_path);
        hnsw.save(
            tmp.to_str()
                .ok_or_else(|| CoreError::invalid("index path is not UTF-8"))?,
        )?;
        fsutil::sync_file(&tmp)?;
        fsutil::publish(&tmp, &graph_path)?;

        sorted.sort_unstable();
        let tmp = fsutil::tmp_path(&keys_path);
        let file = File::create(&tmp).map_err(|e| CoreError::io(&tmp, e))?;
        let mut w = BufWriter::new(file);
        let write = |w: &mut BufWriter<File>| -> std::io::Result<()> {
            w.write_all(MAGIC)?;
            w.write_all(&VERSION.to_le_bytes())?;
            w.write_all(&(sorted.len() as u64).to_le_bytes())?;
            for (key, stamp) in &sorted {
                w.write_all(&key.to_le_bytes())?;
                w.write_all(&stamp.to_le_bytes())?;
            }
            w.flush()?;
            w.get_ref().sync_all()
        };
        write(&mut w).map_err(|e| CoreError::io(&tmp, e))?;
        fsutil::publish(&tmp, &keys_path)?;
        Ok(Some(SegmentMeta {
            id,
            count: sorted.len() as u64,
        }))
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
        let version = u32::from_le_bytes(keys[4..8].try_into().expect("4 bytes"));
        let count = u64::from_le_bytes(keys[8..16].try_into().expect("8 bytes")) as usize;
        match version {
            VERSION
                if count.checked_mul(ENTRY).and_then(|n| n.checked_add(HEADER))
                    == Some(keys.len()) => {}
            VERSION => {
                return Err(corrupt(format!(
                    "expected {count} entries, file has {} bytes",
                    keys.len()
                )))
            }
            GROUPED => {
                return Err(corrupt(
                    "written by an older Backtrail with near-copy groups; rebuild the index".into(),
                ))
            }
            other => return Err(corrupt(format!("unknown key file version {other}"))),
        }
        let file = File::open(&graph_path).map_err(|e| CoreError::io(&graph_path, e))?;
        // SAFETY: as above, published files are never modified.
        let graph = unsafe { Mmap::map(&file) }.map_err(|e| CoreError::io(&graph_path, e))?;
        Ok(Segment {
            id,
            hnsw: OnceLock::new(),
            viewing: Mutex::new(()),
            graph,
            graph_path,
            expansion_search,
            keys,
            count,
        })
    }

    /// The usearch view of the graph, built on first use.
    fn hnsw(&self) -> Result<&HnswIndex> {
        if let Some(hnsw) = self.hnsw.get() {
            return Ok(hnsw);
        }
        let _one_viewer = self.viewing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hnsw) = self.hnsw.get() {
            return Ok(hnsw);
        }
        let corrupt = |e| self.corrupt(e);
        let meta = HnswIndex::metadata_from_buffer(&self.graph).map_err(corrupt)?;
        let hnsw = HnswIndex::new(&meta.into()).map_err(corrupt)?;
        // SAFETY: the mapping lives as long as `self`, and `hnsw` (declared first) is
        // dropped before it; the file is never modified.
        unsafe { hnsw.view_from_buffer(&self.graph) }.map_err(corrupt)?;
        hnsw.change_expansion_search(self.expansion_search);
        Ok(self.hnsw.get_or_init(|| hnsw))
    }

    fn corrupt(&self, e: cxx::Exception) -> CoreError {
        CoreError::IndexCorrupt {
            path: self.graph_path.clone(),
            reason: e.to_string(),
        }
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
            let (k, stamp) = self.entry(mid);
            match k.cmp(&key) {
                std::cmp::Ordering::Equal => return Some(stamp),
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

    /// Approximate nearest neighbours: `(key, cosine similarity, stamp)`, best first.
    pub fn search(&self, query: &[f32], count: usize, expansion: usize) -> Result<Vec<Found>> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        let hnsw = self.hnsw()?;
        if expansion > 0 && expansion != hnsw.expansion_search() {
            hnsw.change_expansion_search(expansion);
        }
        Ok(self.stamped(hnsw.search(query, count)?))
    }

    /// Like [`Segment::search`], visiting only keys `allow` accepts.
    pub fn filtered_search<F: Fn(u64) -> bool>(
        &self,
        query: &[f32],
        count: usize,
        allow: F,
    ) -> Result<Vec<Found>> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        Ok(self.stamped(self.hnsw()?.filtered_search(query, count, allow)?))
    }

    /// usearch's matches as `(key, similarity, stamp)`.
    fn stamped(&self, m: usearch::ffi::Matches) -> Vec<Found> {
        m.keys
            .into_iter()
            .zip(m.distances)
            .filter_map(|(key, d)| Some((key, 1.0 - d, self.stamp_of(key)?)))
            .collect()
    }

    /// The stored (dequantised) vector of `key`.
    pub fn get(&self, key: u64, dim: usize) -> Result<Option<Vec<f32>>> {
        let mut buf = vec![0f32; dim];
        let found = self.hnsw()?.get(key, &mut buf)?;
        Ok((found > 0).then_some(buf))
    }
}
