//! Behaviour of one index directory through the public API: writes, deletes, vectors,
//! compaction and corruption.

mod common;

use backtrail_core::{CoreError, Filters, Index, Kind, Op, OpenOptions};
use common::*;

#[test]
fn upsert_replaces_and_deletes_remove_documents() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    index
        .stage([Op::Upsert(page(1, "old", "alpha words"))])
        .unwrap();
    index.commit(None).unwrap();
    index
        .stage([Op::Upsert(page(1, "new", "beta words"))])
        .unwrap();
    index.commit(None).unwrap();
    assert_eq!(search(&index, "alpha"), Vec::<u64>::new());
    assert_eq!(search(&index, "beta"), [1]);
    assert_eq!(index.stats().unwrap().documents, 1);
    assert_eq!(index.documents().unwrap(), 1);

    let mut other = page(2, "t", "beta too");
    other.domain = "docs.python.org".into();
    let mut third = page(3, "t", "beta again");
    third.domain = "python.org".into();
    let mut old = page(4, "t", "beta old");
    old.last_seen = 1_000;
    old.first_seen = 1_000;
    index
        .stage([Op::Upsert(other), Op::Upsert(third), Op::Upsert(old)])
        .unwrap();
    index.commit(None).unwrap();
    assert_eq!(search(&index, "beta").len(), 4);

    index
        .stage([Op::DeleteDomain("python.org".into())])
        .unwrap();
    index.commit(None).unwrap();
    assert_eq!(search(&index, "beta"), [1, 4]);
    index.stage([Op::DeleteRange(None, Some(2_000))]).unwrap();
    index.commit(None).unwrap();
    assert_eq!(search(&index, "beta"), [1]);
    index
        .stage([Op::DeleteUrl("https://example.org/1".into())])
        .unwrap();
    index.commit(None).unwrap();
    assert_eq!(search(&index, "beta"), Vec::<u64>::new());
}

#[test]
fn delete_parents_removes_all_passages_of_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut a = page(11, "p", "shared word one");
    a.parent = 10;
    let mut b = page(12, "p", "shared word two");
    b.parent = 10;
    let c = page(20, "q", "shared word three");
    index
        .stage([Op::Upsert(a), Op::Upsert(b), Op::Upsert(c)])
        .unwrap();
    index.commit(None).unwrap();
    index.stage([Op::DeleteParents(vec![10])]).unwrap();
    index.commit(None).unwrap();
    assert_eq!(search(&index, "shared"), [20]);
}

#[test]
fn watermark_is_read_back_by_another_handle() {
    let dir = tempfile::tempdir().unwrap();
    let writer = open(dir.path());
    let reader = open(dir.path());
    assert_eq!(reader.watermark().unwrap(), None);
    writer.stage([Op::Upsert(page(1, "t", "text"))]).unwrap();
    writer.commit(Some("seq:17".into())).unwrap();
    assert_eq!(reader.watermark().unwrap().as_deref(), Some("seq:17"));
    writer.commit(None).unwrap();
    assert_eq!(
        reader.watermark().unwrap().as_deref(),
        Some("seq:17"),
        "None keeps the watermark"
    );
    assert_eq!(search(&reader, "text"), [1]);
}

#[test]
fn bad_documents_are_rejected_and_nothing_is_staged() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut bad = page(2, "t", "x");
    bad.vector = Some(vec![1.0; 7]);
    let err = index
        .stage([Op::Upsert(page(1, "t", "x")), Op::Upsert(bad)])
        .unwrap_err();
    assert!(matches!(err, CoreError::InvalidArgument(_)), "{err}");
    assert_eq!(index.pending(), 0);
    assert!(index.stage([Op::DeleteRange(None, None)]).is_err());
    assert!(index.stage([Op::DeleteIds(vec![0])]).is_err());
}

#[test]
fn vectors_are_kept_while_text_is_unchanged_and_dropped_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut d = page(1, "t", "some text");
    d.vector = Some(axis_vector(3, 0.01));
    index.stage([Op::Upsert(d)]).unwrap();
    index.commit(None).unwrap();
    assert!(index.get(1).unwrap().unwrap().vector.is_some());

    let mut revisit = page(1, "t", "some text");
    revisit.visits = 5;
    index.stage([Op::Upsert(revisit)]).unwrap();
    index.commit(None).unwrap();
    let got = index.get(1).unwrap().unwrap();
    assert_eq!(got.visits, 5);
    let v = got.vector.expect("vector kept when the text is unchanged");
    assert!(v[3] > 0.9);

    index
        .stage([Op::Upsert(page(1, "t", "different text"))])
        .unwrap();
    index.commit(None).unwrap();
    assert!(index.get(1).unwrap().unwrap().vector.is_none());
}

#[test]
fn vector_search_never_returns_replaced_or_deleted_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    for i in 1..=20u64 {
        let mut d = page(i, "t", &format!("doc {i}"));
        d.vector = Some(axis_vector(i as usize, 0.01));
        index.stage([Op::Upsert(d)]).unwrap();
        index.commit(None).unwrap();
    }
    let q = axis_vector(5, 0.0);
    assert_eq!(ids(&index.search(&vector_request(&q, 1)).unwrap()), [5]);
    // Doc 5 now points elsewhere; doc 7 is deleted.
    let mut moved = page(5, "t", "doc 5 moved");
    moved.vector = Some(axis_vector(100, 0.01));
    index
        .stage([Op::Upsert(moved), Op::DeleteIds(vec![7])])
        .unwrap();
    index.commit(None).unwrap();
    let hits = index.search(&vector_request(&q, 20)).unwrap();
    let five = hits
        .iter()
        .find(|h| h.doc.id == 5)
        .expect("doc 5 is still found by its new vector");
    assert!(
        five.explanation.similarity.unwrap() < 0.5,
        "the old vector of doc 5 must not match"
    );
    assert!(!ids(&hits).contains(&7));
    assert_eq!(
        ids(&index
            .search(&vector_request(&axis_vector(100, 0.0), 1))
            .unwrap()),
        [5]
    );
    assert_eq!(
        index.stats().unwrap().vector_segments,
        21,
        "commits do not merge"
    );
    assert!(index.needs_vector_merge().unwrap());
    while index.merge_vectors().unwrap() {}
    assert!(!index.needs_vector_merge().unwrap());
    let stats = index.stats().unwrap();
    assert!(
        stats.vector_segments <= 2,
        "small segments are merged: {stats:?}"
    );
    assert_eq!(stats.documents_with_vectors, 19);
    assert_eq!(
        ids(&index
            .search(&vector_request(&axis_vector(100, 0.0), 1))
            .unwrap()),
        [5],
        "the merged segment keeps the newest vector"
    );
    assert!(!ids(&index.search(&vector_request(&q, 20)).unwrap()).contains(&7));

    for i in 30..=40u64 {
        let mut d = page(i, "t", &format!("doc {i}"));
        d.vector = Some(axis_vector(i as usize, 0.01));
        index.stage([Op::Upsert(d)]).unwrap();
        index.commit(None).unwrap();
    }
    index.stop_merging();
    assert!(
        !index.merge_vectors().unwrap(),
        "a stopped handle does not merge"
    );
    assert!(index.needs_vector_merge().unwrap());
}

#[test]
fn vector_segments_merge_while_other_handles_commit() {
    let dir = tempfile::tempdir().unwrap();
    let writer = open(dir.path());
    let merger = open(dir.path());
    let done = std::sync::atomic::AtomicBool::new(false);
    let merges = std::thread::scope(|s| {
        let merging = s.spawn(|| {
            let mut merges = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if merger.merge_vectors().unwrap() {
                    merges += 1;
                }
            }
            merges
        });
        for i in 1..=120u64 {
            // Vectors spread as real embeddings are (see `spread_vector`): the searches
            // below then find each one, whichever segments the merges left.
            let mut d = page(i, "t", &format!("doc {i}"));
            d.vector = Some(spread_vector(i as usize, i));
            // Re-embed an older document too: its vector in a segment being merged is
            // superseded while the merge runs.
            let mut again = page(i / 2 + 1, "t", &format!("doc {} again", i / 2 + 1));
            again.vector = Some(spread_vector(200 + (i as usize % 100), 1000 + i));
            writer.stage([Op::Upsert(d), Op::Upsert(again)]).unwrap();
            writer.commit(None).unwrap();
            // captures arrive apart; back-to-back commits would starve the merger's
            // polling lock
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        merging.join().unwrap()
    });
    assert!(merges > 0, "the merger found work");
    let stats = writer.stats().unwrap();
    assert!(stats.vector_segments <= 24, "{stats:?}");
    assert_eq!(stats.documents_with_vectors, 120);
    for i in 62..=120u64 {
        // never re-embedded: its own vector is kept, and found by a search
        let kept = writer.get(i).unwrap().unwrap().vector.unwrap();
        assert!(kept[i as usize] > 0.9, "doc {i} lost its vector");
        let hits = writer
            .search(&vector_request(&axis_vector(i as usize, 0.0), 1))
            .unwrap();
        assert_eq!(ids(&hits), [i]);
    }
    for i in 1..=61u64 {
        // re-embedded: its first vector must not match any more
        let got = writer.get(i).unwrap().unwrap().vector.unwrap();
        assert!(got[i as usize] < 0.5, "doc {i} kept a superseded vector");
    }
}

#[test]
fn filtered_vector_search_respects_kind_domain_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut ops = Vec::new();
    for i in 1..=30u64 {
        let mut d = page(i, "t", "x");
        d.kind = if i % 2 == 0 {
            Kind::Note
        } else {
            Kind::Passage
        };
        d.domain = if i % 3 == 0 {
            "a.example.com".into()
        } else {
            "other.net".into()
        };
        d.first_seen = 0;
        d.last_seen = 1_000 * i as i64;
        d.vector = Some(axis_vector(i as usize, 0.05));
        ops.push(Op::Upsert(d));
    }
    index.stage(ops).unwrap();
    index.commit(None).unwrap();
    let q = axis_vector(6, 0.0);
    let mut req = vector_request(&q, 30);
    req.filters = Filters {
        kinds: vec![Kind::Note],
        domains: vec!["example.com".into()],
        since: Some(10_000),
        until: None,
    };
    let hits = ids(&index.search(&req).unwrap());
    assert_eq!(hits.len(), 4, "{hits:?}");
    assert!(hits.iter().all(|&i| i % 6 == 0 && i >= 10));
    // kinds and times alone are checked on the columns while the hits are placed
    req.filters.domains.clear();
    req.filters.until = Some(26_000);
    let mut hits = ids(&index.search(&req).unwrap());
    hits.sort_unstable();
    assert_eq!(hits, [10, 12, 14, 16, 18, 20, 22, 24], "{hits:?}");
}

#[test]
fn a_filter_that_keeps_most_documents_gives_the_same_hits_as_searching_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut ops = Vec::new();
    for i in 1..=300u64 {
        let mut d = page(i, "t", "x");
        d.kind = if i % 10 == 0 {
            Kind::Fact
        } else {
            Kind::Passage
        };
        // every vector near axis 1, at distances that grow with i
        let mut v = axis_vector(1, 0.0);
        v[2 + (i as usize % 300)] = i as f32 / 100.0;
        d.vector = Some(v);
        ops.push(Op::Upsert(d));
    }
    index.stage(ops).unwrap();
    index.commit(None).unwrap();
    let q = axis_vector(1, 0.0);
    let unfiltered = ids(&index.search(&vector_request(&q, 5)).unwrap());
    let mut no_facts = vector_request(&q, 5);
    no_facts.filters.kinds = vec![Kind::Passage];
    let kept = ids(&index.search(&no_facts).unwrap());
    let expected: Vec<u64> = (1..=300u64).filter(|i| i % 10 != 0).take(5).collect();
    assert_eq!(kept, expected, "unfiltered: {unfiltered:?}");
    // a filter that keeps few documents: the nearest of those few, not an empty list
    let mut facts = vector_request(&q, 5);
    facts.filters.kinds = vec![Kind::Fact];
    assert_eq!(ids(&index.search(&facts).unwrap()), [10, 20, 30, 40, 50]);
}

#[test]
fn compact_removes_deleted_text_from_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut secret = page(1, "t", "zanzibarquux is a very secret word");
    secret.vector = Some(axis_vector(1, 0.0));
    let mut keep = page(2, "t", "ordinary words stay");
    keep.vector = Some(axis_vector(2, 0.0));
    index.stage([Op::Upsert(secret), Op::Upsert(keep)]).unwrap();
    index.commit(None).unwrap();
    index.stage([Op::DeleteIds(vec![1])]).unwrap();
    index.commit(None).unwrap();
    index.compact().unwrap();
    assert_eq!(search(&index, "zanzibarquux"), Vec::<u64>::new());
    assert_eq!(search(&index, "ordinary"), [2]);
    let mut found_in = Vec::new();
    for entry in walk(dir.path()) {
        let bytes = std::fs::read(&entry).unwrap();
        if bytes.windows(12).any(|w| w == b"zanzibarquux") {
            found_in.push(entry);
        }
    }
    assert!(
        found_in.is_empty(),
        "deleted text still on disk in {found_in:?}"
    );
    let stats = index.stats().unwrap();
    assert_eq!((stats.vector_segments, stats.vectors), (1, 1));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn delete_all_empties_text_and_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut d = page(1, "t", "anything");
    d.vector = Some(axis_vector(1, 0.0));
    index.stage([Op::Upsert(d)]).unwrap();
    index.commit(None).unwrap();
    index.stage([Op::DeleteAll]).unwrap();
    index.commit(None).unwrap();
    let stats = index.stats().unwrap();
    assert_eq!((stats.documents, stats.vectors), (0, 0));
}

#[test]
fn clear_vectors_drops_every_vector_and_keeps_text_and_the_batchs_own_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    for i in 1..=3u64 {
        let mut d = page(i, "t", &format!("word{i} text"));
        d.vector = Some(axis_vector(i as usize, 0.01));
        index.stage([Op::Upsert(d)]).unwrap();
        index.commit(None).unwrap();
    }
    // Another model's vector for doc 2, in the batch that drops the old ones.
    let mut two = page(2, "t", "word2 text");
    two.vector = Some(axis_vector(50, 0.01));
    index.stage([Op::Upsert(two), Op::ClearVectors]).unwrap();
    index.commit(Some("switched".into())).unwrap();
    let stats = index.stats().unwrap();
    assert_eq!((stats.documents, stats.documents_with_vectors), (3, 1));
    assert_eq!(stats.vector_segments, 1, "the old segments are gone");
    assert_eq!(search(&index, "word1"), [1], "text stays searchable");
    assert!(index.get(1).unwrap().unwrap().vector.is_none());
    assert!(index.get(2).unwrap().unwrap().vector.unwrap()[50] > 0.9);
    let hits = index
        .search(&vector_request(&axis_vector(1, 0.0), 3))
        .unwrap();
    assert_eq!(ids(&hits), [2], "only the new vector is searched");
    // An unchanged upsert does not bring a dropped vector back; a new one is kept.
    index
        .stage([Op::Upsert(page(1, "t", "word1 text"))])
        .unwrap();
    index.commit(None).unwrap();
    assert!(index.get(1).unwrap().unwrap().vector.is_none());
    assert_eq!(index.stats().unwrap().documents_with_vectors, 1);
    let mut one = page(1, "t", "word1 text");
    one.vector = Some(axis_vector(60, 0.01));
    index.stage([Op::Upsert(one)]).unwrap();
    index.commit(None).unwrap();
    assert_eq!(index.stats().unwrap().documents_with_vectors, 2);
    let reopened = open(dir.path());
    assert_eq!(reopened.stats().unwrap().documents_with_vectors, 2);
    assert_eq!(reopened.watermark().unwrap().as_deref(), Some("switched"));
}

#[test]
fn a_non_index_directory_payload_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    std::fs::write(dir.path().join("backtrail-index.json"), "{oops").unwrap();
    assert!(matches!(
        Index::open(dir.path(), OpenOptions::default()),
        Err(CoreError::IndexCorrupt { .. })
    ));
}

#[test]
fn an_index_whose_vectors_hold_near_copy_groups_is_reported_as_corrupt_to_be_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut d = page(1, "t", "body");
    d.vector = Some(axis_vector(0, 0.0));
    index.stage([Op::Upsert(d)]).unwrap();
    index.commit(None).unwrap();
    drop(index);
    // An older core wrote its segments' key files as version 2, with the groups after the
    // (key, stamp) table.
    let keys = walk(dir.path())
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "keys"))
        .unwrap();
    let mut bytes = std::fs::read(&keys).unwrap();
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&keys, &bytes).unwrap();
    let err = Index::open(dir.path(), OpenOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, CoreError::IndexCorrupt { .. }), "{err}");
    assert!(err.to_string().contains("rebuild"), "{err}");
}

#[test]
fn touch_updates_stats_of_all_passages_and_keeps_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut ops = Vec::new();
    for id in [11, 12] {
        let mut d = page(id, "t", &format!("touched body {id}"));
        d.parent = 10;
        d.vector = Some(axis_vector(id as usize, 0.0));
        ops.push(Op::Upsert(d));
    }
    index.stage(ops).unwrap();
    index.commit(None).unwrap();
    index
        .stage([Op::Touch {
            parent: 10,
            last_seen: 1_800_000_000,
            visits: 9,
        }])
        .unwrap();
    index.commit(None).unwrap();
    for id in [11, 12] {
        let d = index.get(id).unwrap().unwrap();
        assert_eq!((d.last_seen, d.visits), (1_800_000_000, 9));
        assert!(d.vector.is_some(), "touch keeps the vector");
        assert_eq!(d.body, format!("touched body {id}"));
    }
    assert_eq!(index.stats().unwrap().documents, 2);
    // A delete later in the same batch wins over the touch.
    index
        .stage([
            Op::Touch {
                parent: 10,
                last_seen: 1_900_000_000,
                visits: 10,
            },
            Op::DeleteParents(vec![10]),
        ])
        .unwrap();
    index.commit(None).unwrap();
    assert_eq!(index.stats().unwrap().documents, 0);
}

#[test]
fn mostly_superseded_vectors_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let first: Vec<Op> = (1..=100u64)
        .map(|i| {
            let mut d = page(i, "t", &format!("doc {i}"));
            d.vector = Some(axis_vector(i as usize, 0.01));
            Op::Upsert(d)
        })
        .collect();
    index.stage(first).unwrap();
    index.commit(None).unwrap();
    assert!(!index.needs_vector_merge().unwrap());
    assert!(
        !index.merge_vectors().unwrap(),
        "one segment, all live: nothing to do"
    );
    // Re-embed 70 of the 100: the first segment keeps 30% live vectors.
    let again: Vec<Op> = (1..=70u64)
        .map(|i| {
            let mut d = page(i, "t", &format!("doc {i} again"));
            d.vector = Some(axis_vector(200 + i as usize, 0.01));
            Op::Upsert(d)
        })
        .collect();
    index.stage(again).unwrap();
    index.commit(None).unwrap();
    let before = index.stats().unwrap();
    assert_eq!(
        (before.vector_segments, before.vectors),
        (2, 170),
        "{before:?}"
    );
    assert!(index.needs_vector_merge().unwrap());
    assert!(index.merge_vectors().unwrap());
    let after = index.stats().unwrap();
    // the sparse segment was rebuilt with its 30 live vectors; the new one was left alone
    assert_eq!(
        (after.vector_segments, after.vectors),
        (2, 100),
        "{after:?}"
    );
    assert_eq!(after.documents_with_vectors, 100);
    assert!(!index.needs_vector_merge().unwrap());
    assert!(!index.merge_vectors().unwrap());
    for i in [1u64, 50, 70] {
        let hits = index
            .search(&vector_request(&axis_vector(200 + i as usize, 0.0), 1))
            .unwrap();
        assert_eq!(ids(&hits), [i]);
    }
    for i in [71u64, 100] {
        let hits = index
            .search(&vector_request(&axis_vector(i as usize, 0.0), 1))
            .unwrap();
        assert_eq!(ids(&hits), [i]);
    }
}

#[test]
fn a_large_text_segment_mostly_deleted_is_rewritten_and_small_ones_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let upserts = |ids: std::ops::RangeInclusive<u64>, words: &str| -> Vec<Op> {
        ids.map(|i| Op::Upsert(page(i, "t", &format!("{words} {i}"))))
            .collect()
    };
    // small: 100 documents, 70 of them replaced, stays as it is (two segments)
    index.stage(upserts(1..=100, "small")).unwrap();
    index.commit(None).unwrap();
    index.stage(upserts(1..=70, "small again")).unwrap();
    index.commit(None).unwrap();
    assert_eq!(index.stats().unwrap().text_segments, 2);
    // large: 12,000 documents, 7,000 replaced in two batches, is rewritten
    index.stage(upserts(1_001..=13_000, "large")).unwrap();
    index.commit(None).unwrap();
    for (start, end) in [(1_001, 4_500), (4_501, 8_000)] {
        index.stage(upserts(start..=end, "large again")).unwrap();
        index.commit(None).unwrap();
    }
    let stats = index.stats().unwrap();
    assert_eq!(stats.documents, 12_100);
    let metas = tantivy::Index::open_in_dir(dir.path())
        .unwrap()
        .searchable_segment_metas()
        .unwrap();
    for m in &metas {
        if m.max_doc() >= 10_000 {
            assert!(
                m.num_deleted_docs() * 2 <= m.max_doc(),
                "a large segment kept most of its deleted documents: {metas:?}"
            );
        }
    }
    assert_eq!(search(&index, "large again 1001")[0], 1001);
}

#[test]
fn small_vector_segments_extend_the_next_largest_until_the_largest_takes_them_in() {
    // At most 32 vectors: every node keeps all its links, so the graphs are exact on
    // these mutually orthogonal vectors.
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let with_vector = |i: u64, axis: usize| {
        let mut d = page(i, "t", &format!("doc {i} axis {axis}"));
        d.vector = Some(axis_vector(axis, 0.01));
        Op::Upsert(d)
    };
    let commit = |ops: Vec<Op>| {
        index.stage(ops).unwrap();
        index.commit(None).unwrap();
    };
    let nearest = |axis: usize| {
        ids(&index
            .search(&vector_request(&axis_vector(axis, 0.0), 1))
            .unwrap())
    };
    let all_found = |last: u64| {
        let wrong: Vec<(u64, Vec<u64>)> = (1..=last)
            .filter(|&i| i != 3)
            .map(|i| (i, nearest(i as usize)))
            .filter(|(i, n)| n != &[*i])
            .collect();
        assert!(
            wrong.is_empty(),
            "not found by their own vectors: {wrong:?}"
        );
        assert_eq!(nearest(203), [3], "doc 3 is found by its new vector");
    };
    commit((1..=24u64).map(|i| with_vector(i, i as usize)).collect());
    commit(vec![with_vector(25, 25)]);
    commit(vec![with_vector(3, 203)]);
    assert_eq!(index.stats().unwrap().vector_segments, 3);
    assert!(index.needs_vector_merge().unwrap());
    assert!(index.merge_vectors().unwrap());
    let stats = index.stats().unwrap();
    // Two vectors are less than an eighth of 24: the large segment is left as it is.
    assert_eq!((stats.vector_segments, stats.vectors), (2, 26), "{stats:?}");
    assert!(!index.needs_vector_merge().unwrap());
    all_found(25);

    commit(vec![with_vector(26, 26)]);
    assert!(index.merge_vectors().unwrap());
    // Three are an eighth: the large one took them in, doc 3's new vector in place of
    // its old one.
    let stats = index.stats().unwrap();
    assert_eq!(
        (
            stats.vector_segments,
            stats.vectors,
            stats.documents_with_vectors
        ),
        (1, 26, 26),
        "{stats:?}"
    );
    all_found(26);
    let old = index
        .search(&vector_request(&axis_vector(3, 0.0), 26))
        .unwrap();
    let three = old.iter().find(|h| h.doc.id == 3).unwrap();
    assert!(three.explanation.similarity.unwrap() < 0.5);
}
