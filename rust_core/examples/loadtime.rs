//! load timing probe
use ort::session::{builder::GraphOptimizationLevel, Session};
use std::time::Instant;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (lib, cached) = (&a[1], &a[2]);
    let t = Instant::now();
    ort::init_from(lib).unwrap().commit();
    println!("init_from {:?}", t.elapsed());
    let t = Instant::now();
    let b = Session::builder().unwrap();
    println!("first builder {:?}", t.elapsed());
    drop(b);
    if a.len() > 3 {
        let t = Instant::now();
        let tiny = std::fs::read(&a[3]).unwrap();
        let _s = Session::builder().unwrap().commit_from_memory(&tiny).unwrap();
        println!("tiny session {:?}", t.elapsed());
    }
    for _ in 0..2 {
        let t = Instant::now();
        let _s = Session::builder().unwrap().with_optimization_level(GraphOptimizationLevel::All).unwrap().with_intra_threads(1).unwrap().commit_from_file(cached).unwrap();
        println!("cached from file {:?}", t.elapsed());
    }
}
