//! What a search finds and how it ranks it, through the public API.

mod common;

use backtrail_core::{CoreError, Mode, Op, SearchOptions, SearchRequest};
use common::*;

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
