//! Behaviour of one index directory through the public API.

use backtrail_core::{
    CoreError, Document, Filters, Index, Kind, Mode, Op, OpenOptions, SearchOptions, SearchRequest,
    DIM,
};

fn open(dir: &std::path::Path) -> Index {
    Index::open(dir, OpenOptions::default()).unwrap()
}

fn page(id: u64, title: &str, body: &str) -> Document {
    let mut d = Document::new(id, Kind::Passage);
    d.title = title.into();
    d.body = body.into();
    d.url = format!("https://example.org/{id}");
    d.domain = "example.org".into();
    d.first_seen = 1_700_000_000;
    d.last_seen = 1_700_000_000;
    d.visits = 1;
    d
}

/// A unit vector pointing mostly along axis `axis`.
fn axis_vector(axis: usize, wobble: f32) -> Vec<f32> {
    let mut v = vec![wobble; DIM];
    v[axis] = 1.0;
    v
}

fn ids(hits: &[backtrail_core::Hit]) -> Vec<u64> {
    hits.iter().map(|h| h.doc.id).collect()
}

fn search(index: &Index, q: &str) -> Vec<u64> {
    ids(&index.search(&SearchRequest::bm25(q, 10)).unwrap())
}

#[test]
fn committed_documents_are_found_by_stemmed_words() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    index
        .stage([
            Op::Upsert(page(
                1,
                "Vacuuming tables",
                "VACUUM reclaims storage occupied by dead tuples.",
            )),
            Op::Upsert(page(2, "Indexes", "A B-tree index speeds up lookups.")),
        ])
        .unwrap();
    assert_eq!(
        search(&index, "vacuum"),
        Vec::<u64>::new(),
        "nothing is visible before commit"
    );
    index.commit(None).unwrap();
    assert_eq!(search(&index, "vacuumed table"), [1]);
    assert_eq!(search(&index, "indexes"), [2]);
}

#[test]
fn chinese_russian_and_greek_pages_are_found_by_a_word_from_them() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    index
        .stage([
            Op::Upsert(page(
                1,
                "数据库",
                "关系型数据库使用结构化查询语言来管理数据。",
            )),
            Op::Upsert(page(
                2,
                "База данных",
                "Реляционная база данных хранит таблицы и индексы.",
            )),
            Op::Upsert(page(
                3,
                "Βάση δεδομένων",
                "Η σχεσιακή βάση δεδομένων αποθηκεύει πίνακες.",
            )),
            Op::Upsert(page(4, "English", "Relational databases store tables.")),
        ])
        .unwrap();
    index.commit(None).unwrap();
    assert_eq!(search(&index, "查询"), [1]);
    assert_eq!(search(&index, "结构化"), [1]);
    assert_eq!(search(&index, "таблицы"), [2]);
    assert_eq!(search(&index, "πίνακες"), [3]);
}

#[test]
fn latin_script_pages_are_stemmed_in_their_own_language_and_found_by_other_inflections() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let pages = [
        (
            1,
            "de",
            "Alte Bücher",
            "In der Bibliothek stehen alte Bücher und Häuser aus Holz.",
        ),
        (
            2,
            "fr",
            "Le cheval",
            "Les enfants mangeaient du pain près du cheval.",
        ),
        (
            3,
            "es-MX",
            "Canciones",
            "Los niños cantaban canciones en la plaza.",
        ),
        (4, "en", "Running", "Runners were running along the river."),
    ];
    let mut ops = Vec::new();
    for (id, language, title, body) in pages {
        let mut d = page(id, title, body);
        d.language = language.into();
        ops.push(Op::Upsert(d));
    }
    index.stage(ops).unwrap();
    index.commit(None).unwrap();
    // Stemmed as English, none of these queries shares a term with its page.
    assert_eq!(search(&index, "Büchern"), [1]);
    assert_eq!(search(&index, "Häusern"), [1]);
    assert_eq!(search(&index, "chevaux"), [2]);
    assert_eq!(search(&index, "manger"), [2]);
    assert_eq!(search(&index, "cantar"), [3]);
    assert_eq!(search(&index, "runs"), [4]);
    assert_eq!(search(&index, "\"alte Büchern\""), [1]);
    assert_eq!(search(&index, "Pferd"), Vec::<u64>::new());
    let hits = index.search(&SearchRequest::bm25("chevaux", 10)).unwrap();
    assert_eq!(hits[0].doc.language, "fr");
    assert!(
        hits[0].snippet.contains("**cheval**"),
        "{}",
        hits[0].snippet
    );
    let reopened = open(dir.path());
    assert_eq!(search(&reopened, "Büchern"), [1]);
}

#[test]
fn a_language_tag_that_is_not_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut d = page(1, "t", "b");
    d.language = "de<script>".into();
    assert!(matches!(
        index.stage([Op::Upsert(d)]),
        Err(CoreError::InvalidArgument(_))
    ));
}

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

fn vector_request(v: &[f32], k: usize) -> SearchRequest<'_> {
    SearchRequest {
        query: "",
        k,
        filters: Filters::default(),
        now: 1_700_000_000,
        mode: Mode::Vector,
        query_vector: Some(v),
        embedder: None,
        exclude_parent: None,
        options: SearchOptions::default(),
    }
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
        stats.vector_segments <= 8,
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
            let mut d = page(i, "t", &format!("doc {i}"));
            d.vector = Some(axis_vector(i as usize, 0.01));
            // Re-embed an older document too: its vector in a segment being merged is
            // superseded while the merge runs.
            let mut again = page(i / 2 + 1, "t", &format!("doc {} again", i / 2 + 1));
            again.vector = Some(axis_vector(200 + (i as usize % 100), 0.01));
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
        // never re-embedded: found by its own vector
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
fn hybrid_search_explains_both_signals_and_groups_passages_by_page() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut ops = Vec::new();
    for (id, parent, body, axis) in [
        (1, 100, "postgres autovacuum tuning", 1),
        (2, 100, "autovacuum thresholds explained", 2),
        (3, 200, "python asyncio event loop", 3),
    ] {
        let mut d = page(id, "t", body);
        d.parent = parent;
        d.vector = Some(axis_vector(axis, 0.02));
        ops.push(Op::Upsert(d));
    }
    index.stage(ops).unwrap();
    index.commit(None).unwrap();
    let q = axis_vector(2, 0.0);
    let mut req = vector_request(&q, 5);
    req.query = "autovacuum";
    req.mode = Mode::Hybrid;
    // Both passages hold the one query word, so coverage weighting would make this BM25
    // alone; a fixed weight shows the fusion itself.
    req.options.rank.coverage_weighting = false;
    req.options.rank.bm25_weight = 0.5;
    let hits = index.search(&req).unwrap();
    assert_eq!(hits.len(), 2, "one hit per page");
    assert_eq!(hits[0].doc.parent, 100);
    assert_eq!(hits[0].passages.len(), 2);
    assert_eq!(hits[0].doc.id, 2, "the passage close in both signals wins");
    let e = &hits[0].explanation;
    assert!(e.bm25.is_some() && e.similarity.is_some());
    assert!(
        hits[0].snippet.contains("**autovacuum**"),
        "{}",
        hits[0].snippet
    );
    assert_eq!(hits[0].doc.body, "");
}

#[test]
fn common_words_a_page_holds_count_little_for_the_query_coverage() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut ops = Vec::new();
    for id in 1..=20u64 {
        let mut d = page(id, "t", &format!("how to set the option number {id}"));
        d.vector = Some(axis_vector(id as usize % 8, 0.02));
        ops.push(Op::Upsert(d));
    }
    index.stage(ops).unwrap();
    index.commit(None).unwrap();
    let q = axis_vector(3, 0.0);
    let coverage = |query| {
        let mut req = vector_request(&q, 3);
        req.query = query;
        req.mode = Mode::Hybrid;
        index.search(&req).unwrap()[0].explanation.coverage
    };
    // Every page holds every word: the query is covered whole.
    assert!((coverage("how to set the option") - 1.0).abs() < 1e-6);
    // Five of six words are held, but the one word no page holds outweighs them all.
    let loose = coverage("how to set the option zeppelin");
    assert!(loose < 0.1, "coverage {loose}");
}

#[test]
fn recency_and_visits_reorder_equally_relevant_documents() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let now = 1_800_000_000;
    let mut old = page(1, "t", "kubernetes ingress guide");
    old.last_seen = now - 400 * 86_400;
    let mut fresh = page(2, "t", "kubernetes ingress guide");
    fresh.last_seen = now - 86_400;
    fresh.visits = 12;
    index.stage([Op::Upsert(old), Op::Upsert(fresh)]).unwrap();
    index.commit(None).unwrap();
    let mut req = SearchRequest::bm25("kubernetes ingress", 2);
    req.now = now;
    req.options.rank.decay_half_life_days = 30.0;
    req.options.rank.visit_weight = 0.2;
    let hits = index.search(&req).unwrap();
    assert_eq!(ids(&hits), [2, 1]);
    assert!(hits[0].explanation.decay > hits[1].explanation.decay);
    assert!(hits[0].explanation.visit_boost > 1.0);
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
fn similar_excludes_the_page_itself() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut ops = Vec::new();
    for (id, parent, axis, wobble) in [
        (1, 1, 4, 0.0),
        (2, 1, 4, 0.01),
        (3, 3, 4, 0.2),
        (4, 4, 9, 0.0),
    ] {
        let mut d = page(id, "t", "x");
        d.parent = parent;
        d.vector = Some(axis_vector(axis, wobble));
        ops.push(Op::Upsert(d));
    }
    index.stage(ops).unwrap();
    index.commit(None).unwrap();
    let hits = index.similar(1, 2, true, SearchOptions::default()).unwrap();
    assert_eq!(ids(&hits)[0], 3);
    assert!(hits.iter().all(|h| h.doc.parent != 1));
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
fn time_filters_apply_to_bm25_search() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut ops = Vec::new();
    for i in 1..=5u64 {
        let mut d = page(i, "t", "common");
        d.first_seen = 0;
        d.last_seen = 1_000 * i as i64;
        ops.push(Op::Upsert(d));
    }
    index.stage(ops).unwrap();
    index.commit(None).unwrap();
    let mut req = SearchRequest::bm25("common", 10);
    req.filters.since = Some(3_000);
    assert_eq!(ids(&index.search(&req).unwrap()).len(), 3);
    req.filters.until = Some(5_000);
    assert_eq!(ids(&index.search(&req).unwrap()).len(), 2);
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
fn words_close_together_and_in_order_outrank_the_same_words_scattered() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let filler = |n: usize, w: &str| vec![w; n].join(" ");
    // Doc 2 holds "connection" twice, so on words alone it scores higher.
    let together = format!(
        "{} the connection pool timeout was raised {}",
        filler(12, "alpha"),
        filler(12, "beta")
    );
    let scattered = format!(
        "connection {} pool {} timeout {} connection",
        filler(8, "gamma"),
        filler(8, "delta"),
        filler(8, "omega")
    );
    let mut words_only = SearchRequest::bm25("connection pool timeout", 2);
    words_only.options.proximity_boost = 0.0;
    index
        .stage([
            Op::Upsert(page(1, "a", &together)),
            Op::Upsert(page(2, "b", &scattered)),
        ])
        .unwrap();
    index.commit(None).unwrap();
    assert_eq!(ids(&index.search(&words_only).unwrap()), [2, 1]);
    let default = SearchRequest::bm25("connection pool timeout", 2);
    assert_eq!(ids(&index.search(&default).unwrap()), [1, 2]);
    // and when the pool is as small as it gets (k = 1: the top 3 candidates)
    assert_eq!(
        ids(&index
            .search(&SearchRequest::bm25("connection pool timeout", 1))
            .unwrap()),
        [1]
    );
    let reversed = index
        .search(&SearchRequest::bm25("timeout pool connection", 2))
        .unwrap();
    assert_eq!(
        ids(&reversed),
        [2, 1],
        "order matters, as in a remembered phrase"
    );
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
