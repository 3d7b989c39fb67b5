//! A search's filters checked on single hits, where most searches keep most documents:
//! cheaper than running every ranking inside the filter's set of documents.

use tantivy::query::{EnableScoring, Query};
use tantivy::{DocAddress, DocSet};

use super::cache::SegmentCache;
use super::{Index, Snapshot};
use crate::error::Result;
use crate::text::query::Filters;
use crate::text::Fields;

/// A search's filters, checked on single hits: kinds and the time range on the
/// fast-field columns (cheap per hit, where the kinds' query would first collect every
/// document of those kinds), domains through their query (`site` has no column).
pub(crate) struct HitFilter {
    /// All the filters as one query, for searches run within the allowed set.
    pub(super) query: Box<dyn Query>,
    /// Allowed kind codes as bits (`None`: any kind).
    kinds: Option<u64>,
    since: Option<i64>,
    until: Option<i64>,
    pub(super) domains: Option<Box<dyn Query>>,
}

impl HitFilter {
    /// The filter of `filters`, or `None` when they restrict nothing.
    pub(crate) fn new(filters: &Filters, fields: &Fields) -> Option<HitFilter> {
        let query = filters.query(fields)?;
        let kinds = (!filters.kinds.is_empty()).then(|| {
            filters
                .kinds
                .iter()
                .fold(0u64, |bits, k| bits | 1 << k.code())
        });
        Some(HitFilter {
            query,
            kinds,
            since: filters.since,
            until: filters.until,
            domains: filters.domains_query(fields),
        })
    }

    pub(super) fn column_allows(&self, cache: &SegmentCache, doc: tantivy::DocId) -> bool {
        if let Some(bits) = self.kinds {
            match cache.kind.first(doc) {
                Some(code) if code < 64 && bits & (1 << code) != 0 => {}
                _ => return false,
            }
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(seen) = cache.last_seen.first(doc) else {
                return false;
            };
            if self.since.is_some_and(|s| seen < s) || self.until.is_some_and(|u| seen >= u) {
                return false;
            }
        }
        true
    }
}

impl Index {
    /// The first `n` of `hits` (best first) that `filter` allows.
    pub(super) fn first_matching<T>(
        &self,
        snap: &Snapshot,
        filter: &HitFilter,
        hits: Vec<T>,
        addr: impl Fn(&T) -> DocAddress,
        n: usize,
    ) -> Result<Vec<T>> {
        let keep = self.allowed(snap, filter, &hits.iter().map(addr).collect::<Vec<_>>())?;
        Ok(hits
            .into_iter()
            .zip(keep)
            .filter_map(|(hit, keep)| keep.then_some(hit))
            .take(n)
            .collect())
    }

    /// Which of `hits` `filter` allows.
    fn allowed(
        &self,
        snap: &Snapshot,
        filter: &HitFilter,
        hits: &[DocAddress],
    ) -> Result<Vec<bool>> {
        let mut caches: Vec<Option<std::sync::Arc<SegmentCache>>> =
            vec![None; snap.searcher.segment_readers().len()];
        let mut keep = Vec::with_capacity(hits.len());
        for hit in hits {
            let slot = &mut caches[hit.segment_ord as usize];
            if slot.is_none() {
                *slot = Some(self.segment_cache(&snap.searcher, hit.segment_ord as usize)?);
            }
            let cache = slot.as_deref().expect("filled above");
            keep.push(filter.column_allows(cache, hit.doc_id));
        }
        if let Some(domains) = &filter.domains {
            let still: Vec<usize> = (0..hits.len()).filter(|&i| keep[i]).collect();
            let addrs: Vec<DocAddress> = still.iter().map(|&i| hits[i]).collect();
            for (i, ok) in still
                .into_iter()
                .zip(filter_matches(snap, &**domains, &addrs)?)
            {
                keep[i] = ok;
            }
        }
        Ok(keep)
    }
}

/// Which of `hits` the filter query matches (one pass per segment, seeking in doc order).
fn filter_matches(snap: &Snapshot, filter: &dyn Query, hits: &[DocAddress]) -> Result<Vec<bool>> {
    let weight = filter.weight(EnableScoring::disabled_from_searcher(&snap.searcher))?;
    let mut order: Vec<usize> = (0..hits.len()).collect();
    order.sort_unstable_by_key(|&i| (hits[i].segment_ord, hits[i].doc_id));
    let mut keep = vec![false; hits.len()];
    let mut at = 0;
    while at < order.len() {
        let ord = hits[order[at]].segment_ord;
        let mut docs = weight.scorer(snap.searcher.segment_reader(ord), 1.0)?;
        while at < order.len() && hits[order[at]].segment_ord == ord {
            let i = order[at];
            let doc = hits[i].doc_id;
            if docs.doc() < doc {
                docs.seek(doc);
            }
            keep[i] = docs.doc() == doc;
            at += 1;
        }
    }
    Ok(keep)
}
