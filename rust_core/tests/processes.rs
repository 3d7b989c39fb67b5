//! Several OS processes on one index directory. The test binary re-runs itself as the
//! worker processes (the ignored `worker` test, configured through environment variables).

#![allow(clippy::print_stdout)] // the worker reports success to the parent on stdout

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use backtrail_core::{Document, Index, Kind, Op, OpenOptions, SearchRequest, DIM};

const WORKERS: usize = 3;
const DOCS_PER_WORKER: u64 = 40;
const VISIBLE_WITHIN: f64 = 1.0;
const BATCH: u64 = 1_500;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn spawn_worker(role: &str, dir: &Path, id: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "worker",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("BT_ROLE", role)
        .env("BT_DIR", dir)
        .env("BT_WORKER", id.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

fn doc(id: u64, word: &str) -> Document {
    let mut d = Document::new(id, Kind::Note);
    d.body = format!("{word} shared body text");
    let mut v = vec![0.01f32; DIM];
    v[(id % DIM as u64) as usize] = 1.0;
    d.vector = Some(v);
    d
}

fn count(index: &Index, word: &str, k: usize) -> usize {
    let mut req = SearchRequest::bm25(word, k);
    req.options.group = false;
    index.search(&req).unwrap().len()
}

/// The worker side: `BT_ROLE` says what to do.
#[test]
#[ignore = "run by the multi-process tests as a child process"]
fn worker() {
    let Ok(role) = std::env::var("BT_ROLE") else {
        return;
    };
    let dir = PathBuf::from(std::env::var("BT_DIR").unwrap());
    let me: usize = std::env::var("BT_WORKER").unwrap().parse().unwrap();
    match role.as_str() {
        "writer" => write_and_watch(&dir, me),
        "batcher" => commit_batches_forever(&dir),
        other => panic!("unknown role {other}"),
    }
}

/// Commits one document at a time, logging when each commit returned, and checks that
/// every document the other workers logged is searchable here within a second.
fn write_and_watch(dir: &Path, me: usize) {
    let index = Index::open(dir.join("index"), OpenOptions::default()).unwrap();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("log-{me}")))
        .unwrap();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut errors = Vec::new();
    let mut check = |seen: &mut HashSet<u64>| {
        for (id, committed_at) in read_logs(dir, me) {
            if seen.contains(&id) {
                continue;
            }
            if count(&index, &format!("w{id}"), 1) == 1 {
                seen.insert(id);
            } else if now() - committed_at > VISIBLE_WITHIN {
                errors.push(format!(
                    "doc {id} not visible {:.2}s after its commit",
                    now() - committed_at
                ));
                seen.insert(id);
            }
        }
    };
    for i in 0..DOCS_PER_WORKER {
        let id = (me as u64 + 1) * 1_000 + i;
        index
            .stage([Op::Upsert(doc(id, &format!("w{id}")))])
            .unwrap();
        index.commit(Some(format!("{me}:{i}"))).unwrap();
        writeln!(log, "{id} {:.6}", now()).unwrap();
        log.flush().unwrap();
        check(&mut seen);
    }
    let expected = (WORKERS as u64 - 1) * DOCS_PER_WORKER;
    let deadline = Instant::now() + Duration::from_secs(60);
    while (seen.len() as u64) < expected && Instant::now() < deadline {
        check(&mut seen);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        seen.len() as u64,
        expected,
        "not every other worker's document was seen"
    );
    println!("WORKER-OK");
}

fn read_logs(dir: &Path, me: usize) -> Vec<(u64, f64)> {
    let mut out = Vec::new();
    for w in (0..WORKERS).filter(|&w| w != me) {
        let text = std::fs::read_to_string(dir.join(format!("log-{w}"))).unwrap_or_default();
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let mut parts = line.split_whitespace();
            let id = parts.next().unwrap().parse().unwrap();
            let at = parts.next().unwrap().parse().unwrap();
            out.push((id, at));
        }
    }
    out
}

#[test]
fn three_processes_write_and_search_one_directory() {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<Child> = (0..WORKERS)
        .map(|w| spawn_worker("writer", dir.path(), w))
        .collect();
    for (w, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("WORKER-OK"),
            "worker {w} failed: {stdout}"
        );
    }
    let index = Index::open(dir.path().join("index"), OpenOptions::default()).unwrap();
    assert_eq!(
        index.stats().unwrap().documents,
        WORKERS as u64 * DOCS_PER_WORKER
    );
    assert_eq!(
        index.stats().unwrap().documents_with_vectors,
        WORKERS as u64 * DOCS_PER_WORKER
    );
}

/// Commits batches of `BATCH` documents sharing one word, forever (until killed).
fn commit_batches_forever(dir: &Path) {
    let index = Index::open(dir.join("index"), OpenOptions::default()).unwrap();
    let mut b: u64 = index
        .watermark()
        .unwrap()
        .map_or(0, |w| w.parse::<u64>().unwrap() + 1);
    loop {
        let ops = (0..BATCH).map(|i| Op::Upsert(doc(b * 10_000 + i + 1, &format!("batch{b}"))));
        index.stage(ops).unwrap();
        index.commit(Some(b.to_string())).unwrap();
        println!("COMMITTED {b}");
        std::io::stdout().flush().unwrap();
        b += 1;
    }
}

/// Blocks until the child reports its first commit, so every round makes progress
/// however slow the machine is (a fixed sleep before the kill once starved this test).
fn await_first_commit(child: &mut Child, round: u64) {
    use std::io::BufRead;
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("COMMITTED") {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(120)).is_err() {
        let _ = child.kill();
        panic!("round {round}: the batcher committed nothing within 120 s");
    }
}

#[test]
fn a_writer_killed_mid_batch_leaves_each_batch_fully_visible_or_absent() {
    let dir = tempfile::tempdir().unwrap();
    let mut rounds_with_partial_batches = HashMap::new();
    for round in 0..20u64 {
        let mut child = spawn_worker("batcher", dir.path(), 0);
        await_first_commit(&mut child, round);
        // Vary the moment of death over the next commits' life (0 to about 400 ms).
        std::thread::sleep(Duration::from_millis((round * 397) % 400));
        child.kill().unwrap();
        child.wait().unwrap();

        let index = Index::open(dir.path().join("index"), OpenOptions::default()).unwrap();
        let last: Option<u64> = index.watermark().unwrap().map(|w| w.parse().unwrap());
        let stats = index.stats().unwrap();
        let batches = last.map_or(0, |l| l + 1);
        assert_eq!(stats.documents, batches * BATCH, "round {round}: {stats:?}");
        assert_eq!(
            stats.documents_with_vectors, stats.documents,
            "round {round}"
        );
        for b in 0..batches {
            let n = count(&index, &format!("batch{b}"), BATCH as usize + 1);
            if n != BATCH as usize {
                rounds_with_partial_batches.insert(round, (b, n));
            }
        }
        assert_eq!(
            count(&index, &format!("batch{batches}"), 10),
            0,
            "round {round}: uncommitted batch visible"
        );
    }
    assert!(
        rounds_with_partial_batches.is_empty(),
        "{rounds_with_partial_batches:?}"
    );
    let index = Index::open(dir.path().join("index"), OpenOptions::default()).unwrap();
    let committed: u64 = index
        .watermark()
        .unwrap()
        .map_or(0, |w| w.parse::<u64>().unwrap() + 1);
    assert!(
        committed >= 20,
        "the workers committed only {committed} batches in 20 rounds"
    );
}
