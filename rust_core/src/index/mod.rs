//! An index directory as one object: open it (creating it if needed), stage writes,
//! commit them under the cross-process lock, and search the latest commit any process
//! made.
//!
//! Readers never hold locks: each search checks whether `meta.json` changed (one `stat`)
//! and, if so, reloads Tantivy's reader and maps any new vector segments. Everything a
//! reader holds is immutable, so a snapshot stays valid while writers publish newer ones.

mod cache;
mod candidates;
mod filter;
mod search;
mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rust_stemmers::Algorithm;
use tantivy::directory::MmapDirectory;
use tantivy::index::SegmentId;
use tantivy::{DocAddress, IndexReader, ReloadPolicy, Searcher, TantivyDocument};

pub use search::{now, Hit, Mode, PassageHit, SearchOptions, SearchRequest};
pub use write::Op;

use crate::doc::Document;
use crate::error::{CoreError, Result};
use crate::lock::WriteLock;
use crate::manifest::{IndexConfig, Manifest, Quantization};
use crate::text::{tokenizer, Fields, StoredDoc};
use crate::vectors::{self, SearchSlots, Segment};
use crate::DIM;
use cache::SegmentCache;

/// How to open (or create) an index.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// How long a commit waits for another process's commit to finish.
    pub lock_timeout: Duration,
    /// Vector precision, used only when the index is created. The default is f16: on real
    /// passages, many of the ten nearest differ by less than i8 keeps apart, so even an
    /// exact search over i8 vectors misses some of the exact ten (`bench/README.md`).
    pub quantization: Quantization,
    /// HNSW degree, used only when the index is created.
    pub connectivity: usize,
    /// HNSW build expansion, used only when the index is created. The default of 400
    /// gives the graph recall@10 0.95 at search expansion 128 on the real corpus's
    /// 175,113 passages, where 128 gave 0.92; indexing them (vectors given) takes 2.2
    /// times as long, a sixth more once their embedding is counted (`bench/README.md`).
    pub expansion_add: usize,
    /// HNSW search expansion (a run-time setting).
    pub expansion_search: usize,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            lock_timeout: Duration::from_secs(30),
            quantization: Quantization::F16,
            connectivity: 16,
            expansion_add: 400,
            expansion_search: 128,
        }
    }
}

/// What one reload of the index sees.
pub(crate) struct Snapshot {
    sig: Option<MetaSig>,
    pub(crate) searcher: Searcher,
    pub(crate) manifest: Manifest,
    pub(crate) segments: Vec<Arc<Segment>>,
    /// The Latin-script stemmers other than English that the documents' languages use.
    pub(crate) languages: Vec<Algorithm>,
}

/// The Latin-script stemmers other than English that the languages in `searcher`'s
/// documents use, read from the term dictionary of their `lang` field.
fn latin_languages(dir: &Path, searcher: &Searcher, f: &Fields) -> Result<Vec<Algorithm>> {
    let mut out = Vec::new();
    for reader in searcher.segment_readers() {
        let inverted = reader.inverted_index(f.lang)?;
        let mut terms = inverted
            .terms()
            .stream()
            .map_err(|e| CoreError::io(dir, e))?;
        while terms.advance() {
            let language = String::from_utf8_lossy(terms.key());
            let latin = tokenizer::latin_stemmer(&language);
            if latin != Algorithm::English && !out.contains(&latin) {
                out.push(latin);
            }
        }
    }
    Ok(out)
}

/// Identity of a `meta.json` version: it is replaced by rename on every commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MetaSig {
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

/// An open index directory.
pub struct Index {
    dir: PathBuf,
    vec_dir: PathBuf,
    fields: Fields,
    config: IndexConfig,
    options: OpenOptions,
    tindex: tantivy::Index,
    reader: IndexReader,
    pending: Mutex<Vec<Op>>,
    snapshot: RwLock<Arc<Snapshot>>,
    refresh: Mutex<()>,
    caches: Mutex<HashMap<SegmentId, Arc<SegmentCache>>>,
    slots: SearchSlots,
    merging_stopped: AtomicBool,
}

impl Index {
    /// Opens the index at `dir`, creating the directory and an empty index if needed.
    pub fn open(dir: impl AsRef<Path>, options: OpenOptions) -> Result<Index> {
        let dir = dir.as_ref().to_path_buf();
        let vec_dir = dir.join(vectors::DIR_NAME);
        std::fs::create_dir_all(&vec_dir).map_err(|e| CoreError::io(&vec_dir, e))?;
        if !dir.join("meta.json").exists() {
            create(&dir, &options)?;
        }
        let config = IndexConfig::load(&dir)?;
        let (schema, fields) = Fields::schema();
        let tindex = open_tantivy(&dir)?;
        if tindex.schema() != schema {
            return Err(CoreError::IndexCorrupt {
                path: dir,
                reason: "the text index was built with a different schema".into(),
            });
        }
        let reader = tindex
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let empty = Arc::new(Snapshot {
            sig: None,
            searcher: reader.searcher(),
            manifest: Manifest::default(),
            segments: Vec::new(),
            languages: Vec::new(),
        });
        let index = Index {
            dir,
            vec_dir,
            fields,
            config,
            options,
            tindex,
            reader,
            pending: Mutex::new(Vec::new()),
            snapshot: RwLock::new(empty),
            refresh: Mutex::new(()),
            caches: Mutex::new(HashMap::new()),
            slots: SearchSlots::new(),
            merging_stopped: AtomicBool::new(false),
        };
        index.snapshot()?;
        Ok(index)
    }

    /// The index directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Settings fixed at creation.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// The latest snapshot, reloading first if another commit happened since.
    pub(crate) fn snapshot(&self) -> Result<Arc<Snapshot>> {
        let sig = meta_sig(&self.dir);
        {
            let current = self.snapshot.read().unwrap_or_else(|p| p.into_inner());
            if sig.is_some() && current.sig == sig {
                return Ok(Arc::clone(&current));
            }
        }
        let _one_refresher = self.refresh.lock().unwrap_or_else(|p| p.into_inner());
        let previous = Arc::clone(&self.snapshot.read().unwrap_or_else(|p| p.into_inner()));
        let sig = meta_sig(&self.dir);
        if sig.is_some() && previous.sig == sig {
            return Ok(previous);
        }
        let fresh = Arc::new(self.load_snapshot(sig, &previous.segments)?);
        self.prune_caches(&fresh.searcher);
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = Arc::clone(&fresh);
        Ok(fresh)
    }

    /// Forces a reload on the next access.
    pub fn reload(&self) -> Result<()> {
        {
            let mut current = self.snapshot.write().unwrap_or_else(|p| p.into_inner());
            *current = Arc::new(Snapshot {
                sig: None,
                searcher: current.searcher.clone(),
                manifest: current.manifest.clone(),
                segments: current.segments.clone(),
                languages: current.languages.clone(),
            });
        }
        self.snapshot().map(|_| ())
    }

    fn load_snapshot(&self, sig: Option<MetaSig>, previous: &[Arc<Segment>]) -> Result<Snapshot> {
        // A writer in another process may garbage-collect files of the commit we are
        // loading while we load it; the next attempt reads the newer meta.json.
        let mut attempt = 0;
        loop {
            let result = (|| -> Result<Snapshot> {
                self.reader.reload()?;
                let searcher = self.reader.searcher();
                let metas = self.tindex.load_metas()?;
                let manifest = Manifest::from_payload(metas.payload.as_deref(), &self.dir)?;
                let segments = vectors::open_segments(
                    &self.vec_dir,
                    &manifest,
                    previous,
                    self.options.expansion_search,
                )?;
                let languages = latin_languages(&self.dir, &searcher, &self.fields)?;
                Ok(Snapshot {
                    sig,
                    searcher,
                    manifest,
                    segments,
                    languages,
                })
            })();
            match result {
                Err(e) if attempt < 5 && !matches!(e, CoreError::IndexCorrupt { .. }) => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(10 * attempt));
                }
                other => return other,
            }
        }
    }

    fn prune_caches(&self, searcher: &Searcher) {
        let live: std::collections::HashSet<SegmentId> = searcher
            .segment_readers()
            .iter()
            .map(|r| r.segment_id())
            .collect();
        self.caches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|id, _| live.contains(id));
    }

    /// Per-segment columns and id map for segment `ord` of `searcher`.
    pub(crate) fn segment_cache(
        &self,
        searcher: &Searcher,
        ord: usize,
    ) -> Result<Arc<SegmentCache>> {
        let reader = searcher.segment_reader(ord as u32);
        let id = reader.segment_id();
        if let Some(c) = self
            .caches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
        {
            return Ok(Arc::clone(c));
        }
        let cache = Arc::new(SegmentCache::new(reader)?);
        self.caches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::clone(&cache));
        Ok(cache)
    }

    /// Where the live document `id` is in `snap`, if it exists.
    pub(crate) fn resolve(&self, snap: &Snapshot, id: u64) -> Result<Option<DocAddress>> {
        for (ord, reader) in snap.searcher.segment_readers().iter().enumerate() {
            let cache = self.segment_cache(&snap.searcher, ord)?;
            if let Some(doc) = cache.doc_of(id) {
                if !reader.is_deleted(doc) {
                    return Ok(Some(DocAddress::new(ord as u32, doc)));
                }
            }
        }
        Ok(None)
    }

    fn stored(&self, snap: &Snapshot, addr: DocAddress) -> Result<StoredDoc> {
        let t: TantivyDocument = snap.searcher.doc(addr)?;
        Ok(self.fields.from_tantivy(&t))
    }

    /// The stored document `id` with its vector, if it exists.
    pub fn get(&self, id: u64) -> Result<Option<Document>> {
        let snap = self.snapshot()?;
        let Some(addr) = self.resolve(&snap, id)? else {
            return Ok(None);
        };
        let stored = self.stored(&snap, addr)?;
        let mut doc = stored.doc;
        if snap.manifest.live_stamp(stored.vstamp) {
            doc.vector =
                vectors::stamped_vector(&snap.segments, id, stored.vstamp, DIM)?.map(|mut v| {
                    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                    v.iter_mut().for_each(|x| *x /= n);
                    v
                });
        }
        Ok(Some(doc))
    }

    /// The watermark of the latest commit any process made.
    pub fn watermark(&self) -> Result<Option<String>> {
        Ok(self.snapshot()?.manifest.watermark.clone())
    }

    /// Live documents in the latest commit: what [`Index::stats`] counts, without its
    /// walk over the files and the vectors.
    pub fn documents(&self) -> Result<u64> {
        Ok(self.snapshot()?.searcher.num_docs())
    }

    /// Counts and sizes, for `stats` commands and health checks.
    pub fn stats(&self) -> Result<IndexStats> {
        let snap = self.snapshot()?;
        let disk_bytes = dir_size(&self.dir);
        Ok(IndexStats {
            documents: snap.searcher.num_docs(),
            text_segments: snap.searcher.segment_readers().len(),
            vector_segments: snap.segments.len(),
            vectors: snap.segments.iter().map(|s| s.len() as u64).sum(),
            documents_with_vectors: self.live_vector_stamps(&snap, None)?.len() as u64,
            disk_bytes,
            watermark: snap.manifest.watermark.clone(),
            pending: self.pending(),
        })
    }
}

/// What [`Index::stats`] reports.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexStats {
    /// Live documents.
    pub documents: u64,
    /// Tantivy segments.
    pub text_segments: usize,
    /// Vector segments.
    pub vector_segments: usize,
    /// Vectors stored (including superseded ones not yet merged away).
    pub vectors: u64,
    /// Live documents that have a vector.
    pub documents_with_vectors: u64,
    /// Bytes on disk.
    pub disk_bytes: u64,
    /// Latest watermark.
    pub watermark: Option<String>,
    /// Operations staged in this handle and not yet committed.
    pub pending: usize,
}

fn open_tantivy(dir: &Path) -> Result<tantivy::Index> {
    let directory = MmapDirectory::open(dir).map_err(|e| CoreError::IndexCorrupt {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    let index = tantivy::Index::open(directory).map_err(|e| CoreError::IndexCorrupt {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    index
        .tokenizers()
        .register(tokenizer::ANALYZER, tokenizer::analyzer());
    Ok(index)
}

/// Bytes of stored documents compressed together (tantivy's default is 16 KB). A search
/// reads each hit's document whole, decompressing its block: a passage is about a
/// kilobyte, so a 16 KB block is a dozen documents decompressed to return one. Indexes
/// keep the size they were created with.
const DOCSTORE_BLOCK: usize = 4096;

/// Creates an empty index under the write lock (several processes may race to do it).
fn create(dir: &Path, options: &OpenOptions) -> Result<()> {
    let _lock = WriteLock::acquire(dir, options.lock_timeout)?;
    if dir.join("meta.json").exists() {
        return Ok(());
    }
    if !matches!(options.connectivity, 2..=128) || options.expansion_add == 0 {
        return Err(CoreError::invalid(
            "connectivity must be in 2..=128 and expansion_add >= 1",
        ));
    }
    IndexConfig {
        format: IndexConfig::FORMAT,
        dimensions: DIM,
        quantization: options.quantization,
        connectivity: options.connectivity,
        expansion_add: options.expansion_add,
    }
    .store(dir)?;
    let (schema, _) = Fields::schema();
    let directory = MmapDirectory::open(dir)
        .map_err(|e| CoreError::io(dir, std::io::Error::other(e.to_string())))?;
    let settings = tantivy::IndexSettings {
        docstore_blocksize: DOCSTORE_BLOCK,
        ..tantivy::IndexSettings::default()
    };
    let index = tantivy::Index::create(directory, schema, settings)?;
    index
        .tokenizers()
        .register(tokenizer::ANALYZER, tokenizer::analyzer());
    let mut writer: tantivy::IndexWriter<TantivyDocument> =
        index.writer_with_num_threads(1, 15_000_000)?;
    let manifest = Manifest::from_payload(None, dir)?;
    let mut prepared = writer.prepare_commit()?;
    prepared.set_payload(&manifest.to_payload());
    prepared.commit()?;
    writer.wait_merging_threads()?;
    Ok(())
}

fn meta_sig(dir: &Path) -> Option<MetaSig> {
    let m = std::fs::metadata(dir.join("meta.json")).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    let mtime_ns = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128);
    Some(MetaSig {
        ino,
        len: m.len(),
        mtime_ns,
    })
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
