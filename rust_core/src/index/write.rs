//! The write path. Writes are staged in the `Index` object and applied by `commit`, which
//! holds the cross-process lock for that one batch: open a fresh Tantivy writer, apply
//! the operations, publish a vector segment for the new vectors, commit text and manifest
//! together, merge small vector segments, delete files no commit refers to, release.
//!
//! A process killed at any point leaves either the previous commit or the new one: vector
//! files are published before the Tantivy commit that names them, and files no commit
//! names are removed by the next writer.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::merge_policy::{LogMergePolicy, MergeCandidate, MergePolicy};
use tantivy::query::{AllQuery, Query};
use tantivy::schema::IndexRecordOption;
use tantivy::{
    DocId, DocSet, IndexWriter, Score, SegmentOrdinal, SegmentReader, TantivyDocument, Term,
    TERMINATED,
};

use super::{open_tantivy, Index, Snapshot};
use crate::doc::{check_id, Document};
use crate::error::{CoreError, Result};
use crate::lock::{self, WriteLock};
use crate::manifest::Manifest;
use crate::text::query::time_range;
use crate::vectors::{self, Entry, Segment};
use crate::DIM;

/// A staged write.
#[derive(Debug, Clone)]
pub enum Op {
    /// Insert or replace a document.
    Upsert(Document),
    /// Delete documents by id.
    DeleteIds(Vec<u64>),
    /// Delete documents whose parent is one of these.
    DeleteParents(Vec<u64>),
    /// Delete documents with this exact URL.
    DeleteUrl(String),
    /// Delete documents of this domain and its subdomains.
    DeleteDomain(String),
    /// Delete documents last seen in `[since, until)`.
    DeleteRange(Option<i64>, Option<i64>),
    /// Delete everything.
    DeleteAll,
    /// Drop every vector the index holds, keeping the documents and their text (each
    /// has no vector until one is upserted again): the vectors of one embedding model
    /// must never be searched with another model's query. Applies before the other
    /// operations of its batch, so vectors upserted in the same batch are kept.
    ClearVectors,
    /// Set `last_seen` and `visits` of every document of a parent, keeping text and
    /// vectors. Touches apply before the other operations of their batch (so a later
    /// upsert or delete in the same batch wins).
    Touch {
        /// The parent whose documents change.
        parent: u64,
        /// New last-seen time, unix seconds.
        last_seen: i64,
        /// New visit count.
        visits: u64,
    },
}

/// [`Index::merge_vectors`] merges vector segments once there are more than this many:
/// a search visits every graph, each costing about as much as one graph of them all.
const MAX_VECTOR_SEGMENTS: usize = 2;
/// The largest vector segment takes in the others once they hold 1/this of its vectors
/// (until then they go into the next largest): its file is rewritten as it grows by that.
const ABSORB_FRACTION: u64 = 8;
/// A commit merges under its lock only past this many (when nobody ran
/// [`Index::merge_vectors`]), to bound how many graphs a search visits.
const MAX_SEGMENTS_AT_COMMIT: usize = 24;
/// Subdirectory of the vector directory where a merge builds its segment.
const MERGING_DIR: &str = "merging";
/// Held (non-blocking) by the one process merging vector segments outside the write lock.
const MERGE_LOCK: &str = ".backtrail-merge.lock";
/// A background rebuild of mostly superseded segments takes no more vectors than this in
/// one commit (`compact` takes them all; an extension inserts only the smaller segments').
const MAX_MERGE_VECTORS: u64 = 200_000;
/// A vector segment with less than this share of its vectors live (the rest belong to
/// re-embedded or deleted documents) is rebuilt by the background merge even when there
/// are few segments: searches would otherwise walk graphs full of dead ends.
const SPARSE_LIVE_SHARE: f64 = 0.6;
/// Likewise for text: a large Tantivy segment with more than this share of deleted
/// documents is rewritten without them. Visits and re-captures rewrite a page's
/// passages, so deletes pile up, and a mostly deleted segment slows every BM25 search.
const TEXT_DELETED_SHARE: f32 = 0.5;
/// Segments from this many documents up count as large. Smaller ones are merged by
/// Tantivy's log policy soon enough, and purging them at every commit would only churn.
const TEXT_PURGE_MIN_DOCS: u32 = 10_000;

impl Index {
    /// Stages operations until [`Index::commit`].
    pub fn stage(&self, ops: impl IntoIterator<Item = Op>) -> Result<()> {
        let mut checked = Vec::new();
        for op in ops {
            checked.push(match op {
                Op::Upsert(doc) => Op::Upsert(doc.validate()?),
                Op::DeleteIds(ids) | Op::DeleteParents(ids)
                    if ids.iter().any(|&i| check_id(i).is_err()) =>
                {
                    return Err(CoreError::invalid("ids must be in 1..=2^63-1"))
                }
                Op::DeleteDomain(d) if d.trim().trim_matches('.').is_empty() => {
                    return Err(CoreError::invalid("domain must not be empty"))
                }
                Op::DeleteRange(None, None) => return Err(CoreError::invalid(
                    "a time range needs since, until or both (use delete_all to delete everything)",
                )),
                other => other,
            });
        }
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(checked);
        Ok(())
    }

    /// Number of staged operations.
    pub fn pending(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Drops staged operations.
    pub fn rollback(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Applies every staged operation atomically and publishes `watermark` (or keeps the
    /// previous one when `None`). Returns the Tantivy opstamp. On error the operations
    /// stay staged, so the caller may retry.
    pub fn commit(&self, watermark: Option<String>) -> Result<u64> {
        let ops = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        let result = self.apply(&ops, watermark);
        if result.is_err() {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let newer = std::mem::take(&mut *pending);
            *pending = ops;
            pending.extend(newer);
        }
        result
    }

    fn apply(&self, ops: &[Op], watermark: Option<String>) -> Result<u64> {
        let _lock = WriteLock::acquire(&self.dir, self.options.lock_timeout)?;
        let tindex = open_tantivy(&self.dir)?;
        let reader = tindex
            .reader_builder()
            .reload_policy(tantivy::ReloadPolicy::Manual)
            .try_into()?;
        let searcher: tantivy::Searcher = reader.searcher();
        let mut manifest =
            Manifest::from_payload(tindex.load_metas()?.payload.as_deref(), &self.dir)?;
        if watermark.is_some() {
            manifest.watermark = watermark;
        }
        let stamp = manifest.take_stamp();
        if ops.iter().any(|o| matches!(o, Op::ClearVectors)) {
            manifest.segments.clear();
            manifest.vector_floor = stamp;
        }
        let docs = ops.iter().filter(|o| matches!(o, Op::Upsert(_))).count();
        let (threads, budget) = if docs > 20_000 {
            (2, 256_000_000)
        } else {
            (1, 40_000_000)
        };
        let mut writer: IndexWriter<TantivyDocument> =
            tindex.writer_with_num_threads(threads, budget)?;
        let mut log = LogMergePolicy::default();
        log.set_min_num_segments(TEXT_MERGE_SEGMENTS);
        writer.set_merge_policy(Box::new(TextMergePolicy { log }));

        // Vectors to publish, last one per id wins; and what each id carries after this batch.
        let mut new_vectors: HashMap<u64, &[f32]> = HashMap::new();
        let mut staged: HashMap<u64, (u64, u64)> = HashMap::new();
        let mut forget_existing = false;
        let f = &self.fields;
        for op in ops {
            if let Op::Touch {
                parent,
                last_seen,
                visits,
            } = op
            {
                touch(&searcher, f, &mut writer, *parent, *last_seen, *visits)?;
            }
        }
        for op in ops {
            match op {
                Op::Touch { .. } | Op::ClearVectors => {}
                Op::Upsert(doc) => {
                    let thash = doc.text_hash();
                    let vstamp = match &doc.vector {
                        Some(v) => {
                            new_vectors.insert(doc.id, v);
                            stamp
                        }
                        None => {
                            let previous = match staged.get(&doc.id) {
                                Some(&p) => Some(p),
                                None if forget_existing => None,
                                None => existing(&searcher, f, doc.id)
                                    .map_err(|e| CoreError::io(&self.dir, e))?,
                            };
                            match previous {
                                Some((vs, h)) if manifest.live_stamp(vs) && h == thash => vs,
                                _ => 0,
                            }
                        }
                    };
                    if vstamp != stamp {
                        new_vectors.remove(&doc.id);
                    }
                    staged.insert(doc.id, (vstamp, thash));
                    writer.delete_term(f.id_term(doc.id));
                    writer.add_document(f.to_tantivy(doc, vstamp))?;
                }
                Op::DeleteIds(ids) => ids.iter().for_each(|&id| {
                    staged.remove(&id);
                    writer.delete_term(f.id_term(id));
                }),
                Op::DeleteParents(ids) => ids.iter().for_each(|&id| {
                    writer.delete_term(Term::from_field_u64(f.parent, id));
                }),
                Op::DeleteUrl(url) => {
                    writer.delete_term(Term::from_field_text(f.url, url));
                }
                Op::DeleteDomain(domain) => {
                    let host = domain.trim().trim_matches('.').to_lowercase();
                    writer.delete_term(Term::from_field_text(f.site, &host));
                }
                Op::DeleteRange(since, until) => {
                    if let Some(q) = time_range(f, *since, *until) {
                        writer.delete_query(q)?;
                    }
                }
                Op::DeleteAll => {
                    writer.delete_all_documents()?;
                    staged.clear();
                    new_vectors.clear();
                    manifest.segments.clear();
                    forget_existing = true;
                }
            }
        }

        let mut published = None;
        if !new_vectors.is_empty() {
            let mut entries: Vec<Entry> = new_vectors
                .iter()
                .map(|(&key, v)| Entry {
                    key,
                    stamp,
                    vector: v,
                })
                .collect();
            entries.sort_unstable_by_key(|e| e.key);
            let meta = Segment::write(&self.vec_dir, stamp, None, &entries, &self.config, None)?;
            manifest.segments.extend(meta);
            published = Some(stamp);
        }
        let opstamp = commit_with(&mut writer, &manifest).inspect_err(|_| {
            if let Some(id) = published {
                remove_segment_files(&self.vec_dir, id);
            }
        })?;
        writer.wait_merging_threads()?;

        if manifest.segments.len() > MAX_SEGMENTS_AT_COMMIT {
            self.merge_vectors_locked(&tindex, &mut manifest, false)?;
        }
        self.collect_garbage(&manifest);
        Ok(opstamp)
    }

    /// True when the latest commit has more vector segments than searches should visit,
    /// or more vector entries than live documents can account for, so
    /// [`Index::merge_vectors`] has work.
    pub fn needs_vector_merge(&self) -> Result<bool> {
        let snap = self.snapshot()?;
        // Live vectors are at most the live documents: when the segments hold too many
        // entries for those, some segment is sparse (the exact count is left to the merge).
        let entries: usize = snap.segments.iter().map(|s| s.len()).sum();
        Ok(snap.manifest.segments.len() > MAX_VECTOR_SEGMENTS
            || entries as f64 * SPARSE_LIVE_SHARE > snap.searcher.num_docs() as f64)
    }

    /// Inserts the smaller vector segments' live vectors into a larger segment's graph
    /// ([`choose_extension`]; or, with few segments, rebuilds those whose vectors are
    /// mostly superseded), building the new graph *without*
    /// holding the write lock, so commits (and so capture-to-searchable) never wait for a
    /// graph build; the lock is taken only to publish it. Returns false when there was
    /// nothing to merge, another process is merging, or a commit meanwhile dropped a
    /// chosen segment (a `delete_all` or `compact`), in which case the work is discarded.
    ///
    /// Vectors that a newer commit supersedes while the graph is built are copied
    /// anyway: a hit counts only while the document still carries the stamp the segment
    /// recorded, so they are never returned, and a later merge drops them.
    pub fn merge_vectors(&self) -> Result<bool> {
        if self.merging_stopped.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let Some(_merger) = lock::try_lock(&self.dir.join(MERGE_LOCK))? else {
            return Ok(false);
        };
        let snap = self.snapshot()?;
        let chosen = match choose_extension(&snap.manifest) {
            Some(extension) => extension,
            None => (None, self.sparse_segments(&snap)?),
        };
        let Some((base, vecs, chosen)) = self.plan_merge(&snap, chosen)? else {
            return Ok(false);
        };
        let staging = self.vec_dir.join(MERGING_DIR);
        // Only the holder of the merge lock uses it: whatever is there was left by a
        // merger that was killed.
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).map_err(|e| CoreError::io(&staging, e))?;
        let entries = as_entries(&vecs);
        let built = if entries.is_empty() {
            None
        } else {
            let cancel = Some(&self.merging_stopped);
            match Segment::write(&staging, 0, base, &entries, &self.config, cancel)? {
                None => return Ok(false),
                built => built,
            }
        };
        drop(snap);

        let _lock = WriteLock::acquire(&self.dir, self.options.lock_timeout)?;
        let tindex = open_tantivy(&self.dir)?;
        let mut manifest =
            Manifest::from_payload(tindex.load_metas()?.payload.as_deref(), &self.dir)?;
        let (staged_graph, staged_keys) = vectors::segment::paths(&staging, 0);
        if !chosen
            .iter()
            .all(|id| manifest.segments.iter().any(|s| s.id == *id))
        {
            let _ = std::fs::remove_file(staged_graph);
            let _ = std::fs::remove_file(staged_keys);
            return Ok(false);
        }
        manifest.segments.retain(|s| !chosen.contains(&s.id));
        let mut published = None;
        if let Some(meta) = built {
            let id = manifest.take_stamp();
            let (graph, keys) = vectors::segment::paths(&self.vec_dir, id);
            std::fs::rename(&staged_graph, &graph).map_err(|e| CoreError::io(&graph, e))?;
            std::fs::rename(&staged_keys, &keys).map_err(|e| CoreError::io(&keys, e))?;
            crate::fsutil::sync_dir(&self.vec_dir)?;
            manifest
                .segments
                .push(crate::manifest::SegmentMeta { id, ..meta });
            published = Some(id);
        }
        let mut writer: IndexWriter<TantivyDocument> =
            tindex.writer_with_num_threads(1, 15_000_000)?;
        commit_with(&mut writer, &manifest).inspect_err(|_| {
            if let Some(id) = published {
                remove_segment_files(&self.vec_dir, id);
            }
        })?;
        writer.wait_merging_threads()?;
        self.collect_garbage(&manifest);
        Ok(true)
    }

    /// Stops merging through this handle, e.g. because the process is shutting down: a
    /// running [`Index::merge_vectors`] gives up soon, before it publishes anything, and
    /// later calls return false at once.
    pub fn stop_merging(&self) {
        self.merging_stopped.store(true, Ordering::Relaxed);
    }

    /// Vector segments most of whose vectors are superseded, smallest first, within
    /// the background merge's budget.
    fn sparse_segments(&self, snap: &Snapshot) -> Result<Vec<u64>> {
        let live = self.live_vector_stamps(snap, None)?;
        let mut sparse: Vec<(usize, u64)> = Vec::new();
        for seg in &snap.segments {
            let alive = seg
                .entries()
                .filter(|(key, stamp)| live.get(key) == Some(stamp))
                .count();
            if (alive as f64) < SPARSE_LIVE_SHARE * seg.len() as f64 {
                sparse.push((seg.len(), seg.id));
            }
        }
        sparse.sort_unstable();
        let mut total = 0;
        let mut chosen = Vec::new();
        for (len, id) in sparse {
            if !chosen.is_empty() && total + len as u64 > MAX_MERGE_VECTORS {
                break;
            }
            total += len as u64;
            chosen.push(id);
        }
        Ok(chosen)
    }

    /// `(key, stamp, vector)` of every live vector held by the segments `chosen`.
    fn live_vectors_of(
        &self,
        snap: &Snapshot,
        chosen: &[u64],
    ) -> Result<Vec<(u64, u64, Vec<f32>)>> {
        let live = self.live_vector_stamps(snap, None)?;
        let mut vecs = Vec::new();
        for seg in snap.segments.iter().filter(|s| chosen.contains(&s.id)) {
            for (key, stamp) in seg.entries() {
                if live.get(&key) == Some(&stamp) {
                    if let Some(v) = seg.get(key, DIM)? {
                        vecs.push((key, stamp, v));
                    }
                }
            }
        }
        Ok(vecs)
    }

    /// Merges all text segments and rebuilds the vectors into one segment, so deleted
    /// documents and superseded vectors leave the disk.
    pub fn compact(&self) -> Result<()> {
        let _lock = WriteLock::acquire(&self.dir, self.options.lock_timeout)?;
        let tindex = open_tantivy(&self.dir)?;
        let mut manifest =
            Manifest::from_payload(tindex.load_metas()?.payload.as_deref(), &self.dir)?;
        let mut writer: IndexWriter<TantivyDocument> =
            tindex.writer_with_num_threads(1, 50_000_000)?;
        let ids = tindex.searchable_segment_ids()?;
        if ids.len() > 1
            || tindex
                .searchable_segment_metas()?
                .iter()
                .any(|m| m.has_deletes())
        {
            writer.merge(&ids).wait()?;
        }
        writer.garbage_collect_files().wait()?;
        writer.wait_merging_threads()?;
        self.merge_vectors_locked(&tindex, &mut manifest, true)?;
        self.collect_garbage(&manifest);
        Ok(())
    }

    /// What a merge of `chosen` (the segment whose graph is extended, and those whose
    /// vectors it takes in) writes; `None` when there is nothing to merge.
    fn plan_merge<'s>(
        &self,
        snap: &'s Snapshot,
        (base, mut chosen): (Option<u64>, Vec<u64>),
    ) -> Result<Option<MergePlan<'s>>> {
        if chosen.is_empty() {
            return Ok(None);
        }
        let vecs = self.live_vectors_of(snap, &chosen)?;
        // Segments without live vectors are dropped, leaving the base as it is.
        let base = base
            .filter(|_| !vecs.is_empty())
            .and_then(|id| snap.segments.iter().find(|s| s.id == id));
        if let Some(base) = base {
            chosen.push(base.id);
        }
        Ok(Some((base.map(|b| &**b), vecs, chosen)))
    }

    /// Under the write lock: inserts the smaller vector segments into a larger one's
    /// graph ([`choose_extension`]), or with `all` rebuilds every segment into one
    /// holding only live vectors, and commits the new manifest.
    fn merge_vectors_locked(
        &self,
        tindex: &tantivy::Index,
        manifest: &mut Manifest,
        all: bool,
    ) -> Result<()> {
        let chosen = if all {
            (None, manifest.segments.iter().map(|s| s.id).collect())
        } else if let Some(extension) = choose_extension(manifest) {
            extension
        } else {
            return Ok(());
        };
        let reader: tantivy::IndexReader = tindex
            .reader_builder()
            .reload_policy(tantivy::ReloadPolicy::Manual)
            .try_into()?;
        let snap = Snapshot {
            sig: None,
            searcher: reader.searcher(),
            manifest: manifest.clone(),
            segments: vectors::open_segments(
                &self.vec_dir,
                manifest,
                &[],
                self.options.expansion_search,
            )?,
            languages: Vec::new(),
        };
        let Some((base, vecs, chosen)) = self.plan_merge(&snap, chosen)? else {
            return Ok(());
        };
        let id = manifest.take_stamp();
        manifest.segments.retain(|s| !chosen.contains(&s.id));
        if !vecs.is_empty() {
            let entries = as_entries(&vecs);
            let meta = Segment::write(&self.vec_dir, id, base, &entries, &self.config, None)?;
            manifest.segments.extend(meta);
        }
        let mut writer: IndexWriter<TantivyDocument> =
            tindex.writer_with_num_threads(1, 15_000_000)?;
        commit_with(&mut writer, manifest)
            .inspect_err(|_| remove_segment_files(&self.vec_dir, id))?;
        writer.wait_merging_threads()?;
        Ok(())
    }

    /// Removes vector files no longer named by `manifest` (we hold the write lock, so no
    /// other writer is publishing; readers that still map an old file keep their mapping).
    fn collect_garbage(&self, manifest: &Manifest) {
        let keep: HashSet<String> = manifest
            .segments
            .iter()
            .flat_map(|s| {
                let (a, b) = vectors::segment::paths(&self.vec_dir, s.id);
                [a, b]
            })
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        if let Ok(entries) = std::fs::read_dir(&self.vec_dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("seg-") && !keep.contains(&name) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    /// `id -> vstamp` of every live document that has a vector (optionally restricted).
    pub(crate) fn live_vector_stamps(
        &self,
        snap: &Snapshot,
        filter: Option<&dyn Query>,
    ) -> Result<HashMap<u64, u64>> {
        let query: &dyn Query = filter.unwrap_or(&AllQuery);
        let collector = StampCollector {
            floor: snap.manifest.vector_floor.max(1),
        };
        Ok(snap.searcher.search(query, &collector)?)
    }
}

/// Tantivy's log merge policy ([`TEXT_MERGE_SEGMENTS`]), plus: a large segment mostly
/// deleted is rewritten.
#[derive(Debug)]
struct TextMergePolicy {
    log: LogMergePolicy,
}

/// Text segments of a size merged together (tantivy's default is 8): a search runs its
/// query once per segment, so fewer make every search cheaper, for a little more merging.
const TEXT_MERGE_SEGMENTS: usize = 4;

impl MergePolicy for TextMergePolicy {
    fn compute_merge_candidates(&self, segments: &[tantivy::SegmentMeta]) -> Vec<MergeCandidate> {
        let mut candidates = self.log.compute_merge_candidates(segments);
        let taken: HashSet<tantivy::index::SegmentId> = candidates
            .iter()
            .flat_map(|c| c.0.iter().copied())
            .collect();
        for seg in segments {
            let deleted = seg.num_deleted_docs() as f32;
            if seg.max_doc() >= TEXT_PURGE_MIN_DOCS
                && deleted > TEXT_DELETED_SHARE * seg.max_doc() as f32
                && !taken.contains(&seg.id())
            {
                candidates.push(MergeCandidate(vec![seg.id()]));
            }
        }
        candidates
    }
}

/// `(key, stamp, vector)` triples as segment entries.
fn as_entries(vecs: &[(u64, u64, Vec<f32>)]) -> Vec<Entry<'_>> {
    vecs.iter()
        .map(|(key, stamp, vector)| Entry {
            key: *key,
            stamp: *stamp,
            vector,
        })
        .collect()
}

/// A merge: the graph extended (`None`: a new one), the live `(key, stamp, vector)` of
/// the segments merged, and every segment replaced.
type MergePlan<'s> = (Option<&'s Segment>, Vec<(u64, u64, Vec<f32>)>, Vec<u64>);

/// The segment a merge extends and those whose vectors it takes in, past
/// [`MAX_VECTOR_SEGMENTS`] (see [`ABSORB_FRACTION`]).
fn choose_extension(manifest: &Manifest) -> Option<(Option<u64>, Vec<u64>)> {
    if manifest.segments.len() <= MAX_VECTOR_SEGMENTS {
        return None;
    }
    let mut by_size = manifest.segments.clone();
    by_size.sort_by_key(|s| std::cmp::Reverse(s.count));
    let rest: u64 = by_size[1..].iter().map(|s| s.count).sum();
    let base = usize::from(rest * ABSORB_FRACTION < by_size[0].count);
    let others = by_size[base + 1..].iter().map(|s| s.id).collect();
    Some((Some(by_size[base].id), others))
}

fn commit_with(writer: &mut IndexWriter<TantivyDocument>, manifest: &Manifest) -> Result<u64> {
    let mut prepared = writer.prepare_commit()?;
    prepared.set_payload(&manifest.to_payload());
    Ok(prepared.commit()?)
}

fn remove_segment_files(dir: &std::path::Path, id: u64) {
    let (a, b) = vectors::segment::paths(dir, id);
    let _ = std::fs::remove_file(a);
    let _ = std::fs::remove_file(b);
}

/// Rewrites every live document of `parent` with new stats, keeping its vector stamp.
fn touch(
    searcher: &tantivy::Searcher,
    f: &crate::text::Fields,
    writer: &mut IndexWriter<TantivyDocument>,
    parent: u64,
    last_seen: i64,
    visits: u64,
) -> Result<()> {
    let term = Term::from_field_u64(f.parent, parent);
    for (ord, reader) in searcher.segment_readers().iter().enumerate() {
        let postings = reader
            .inverted_index(f.parent)?
            .read_postings(&term, IndexRecordOption::Basic);
        let Some(mut postings) = postings.map_err(|e| CoreError::Tantivy(e.into()))? else {
            continue;
        };
        let mut doc = postings.doc();
        while doc != TERMINATED {
            if !reader.is_deleted(doc) {
                let stored: TantivyDocument =
                    searcher.doc(tantivy::DocAddress::new(ord as u32, doc))?;
                let mut s = f.from_tantivy(&stored);
                s.doc.last_seen = last_seen.max(s.doc.first_seen);
                s.doc.visits = visits;
                writer.delete_term(f.id_term(s.doc.id));
                writer.add_document(f.to_tantivy(&s.doc, s.vstamp))?;
            }
            doc = postings.advance();
        }
    }
    Ok(())
}

/// The `(vstamp, thash)` of the live document `id` in `searcher`, if any.
fn existing(
    searcher: &tantivy::Searcher,
    f: &crate::text::Fields,
    id: u64,
) -> std::io::Result<Option<(u64, u64)>> {
    let term = f.id_term(id);
    for reader in searcher.segment_readers() {
        let Some(mut postings) = reader
            .inverted_index(f.id)
            .map_err(|e| std::io::Error::other(e.to_string()))?
            .read_postings(&term, IndexRecordOption::Basic)?
        else {
            continue;
        };
        let mut doc = postings.doc();
        while doc != TERMINATED {
            if !reader.is_deleted(doc) {
                let ff = reader.fast_fields();
                let col = |name: &str| {
                    ff.u64(name)
                        .map_err(|e| std::io::Error::other(e.to_string()))
                };
                let vstamp = col("vstamp")?.first(doc).unwrap_or(0);
                let thash = col("thash")?.first(doc).unwrap_or(0);
                return Ok(Some((vstamp, thash)));
            }
            doc = postings.advance();
        }
    }
    Ok(None)
}

/// Collects `id -> vstamp` for matching documents that have a vector (a stamp from
/// `floor` up: see [`Manifest::vector_floor`]).
pub(crate) struct StampCollector {
    floor: u64,
}

pub(crate) struct StampSegmentCollector {
    id: tantivy::columnar::Column<u64>,
    vstamp: tantivy::columnar::Column<u64>,
    floor: u64,
    out: Vec<(u64, u64)>,
}

impl Collector for StampCollector {
    type Fruit = HashMap<u64, u64>;
    type Child = StampSegmentCollector;

    fn for_segment(
        &self,
        _: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<StampSegmentCollector> {
        Ok(StampSegmentCollector {
            id: reader.fast_fields().u64("id")?,
            vstamp: reader.fast_fields().u64("vstamp")?,
            floor: self.floor,
            out: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, parts: Vec<Vec<(u64, u64)>>) -> tantivy::Result<HashMap<u64, u64>> {
        Ok(parts.into_iter().flatten().collect())
    }
}

impl SegmentCollector for StampSegmentCollector {
    type Fruit = Vec<(u64, u64)>;

    fn collect(&mut self, doc: DocId, _: Score) {
        let vs = self.vstamp.first(doc).unwrap_or(0);
        if vs >= self.floor {
            if let Some(id) = self.id.first(doc) {
                self.out.push((id, vs));
            }
        }
    }

    fn harvest(self) -> Vec<(u64, u64)> {
        self.out
    }
}
