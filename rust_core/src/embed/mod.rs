//! Sentence embeddings: all-MiniLM-L6-v2 as ONNX, run through onnxruntime (loaded at run
//! time from the library the `onnxruntime` Python wheel ships) and tokenised by the
//! `tokenizers` crate. Vectors are mean-pooled over the attention mask and L2-normalised,
//! exactly as sentence-transformers does for this model.
//!
//! Throughput comes from three choices measured in `bench/`: texts are sorted by token
//! count so each batch pads to a similar length, onnxruntime's own graph optimiser runs at
//! its highest level (its result kept on disk, `kept.rs`), and several single-threaded
//! sessions can work on different batches at once.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;
use sha2::{Digest, Sha256};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use crate::error::{CoreError, Result};
use crate::DIM;

mod kept;

use kept::{GraphCache, Save};

/// How to load the model.
#[derive(Debug, Clone)]
pub struct EmbedderConfig {
    /// Absolute path of `libonnxruntime.so.*` (or `.dylib` / `.dll`).
    pub ort_library: PathBuf,
    /// `model.onnx`.
    pub model: PathBuf,
    /// `tokenizer.json`.
    pub tokenizer: PathBuf,
    /// Expected sha256 of `model.onnx` (hex), checked before loading when given.
    pub sha256: Option<String>,
    /// Intra-op threads per session; 0 shares the machine's cores among the sessions.
    pub threads: usize,
    /// Sessions working on different batches in parallel.
    pub sessions: usize,
    /// Token cap per text (longer texts are truncated).
    pub max_tokens: usize,
    /// Texts per batch.
    pub batch_size: usize,
    /// Directory for onnxruntime's optimised graph of this model, so later loads skip the
    /// graph optimiser and map the weights instead of reading them (`kept.rs`). The files'
    /// names carry the model's identity and the onnxruntime library's; an unusable graph
    /// is rebuilt.
    pub cache_dir: Option<PathBuf>,
}

impl EmbedderConfig {
    /// Defaults for the given files: one session using every core, 256 tokens, batch 16.
    pub fn new(
        ort_library: impl Into<PathBuf>,
        model: impl Into<PathBuf>,
        tokenizer: impl Into<PathBuf>,
    ) -> Self {
        EmbedderConfig {
            ort_library: ort_library.into(),
            model: model.into(),
            tokenizer: tokenizer.into(),
            sha256: None,
            threads: 0,
            sessions: 1,
            max_tokens: 256,
            batch_size: 16,
            cache_dir: None,
        }
    }
}

/// A loaded embedding model.
pub struct Embedder {
    tokenizer: Tokenizer,
    sessions: Vec<Mutex<Session>>,
    config: EmbedderConfig,
    /// The latest query vectors, most recent last ([`Embedder::embed_query`]).
    queries: Mutex<VecDeque<(String, Vec<f32>)>>,
    /// Queries embedded, and queries answered from `queries`.
    query_counts: (AtomicUsize, AtomicUsize),
}

/// Query vectors [`Embedder::embed_query`] keeps: a result page and the next one ask for
/// the same query, and assistants often repeat a search.
const QUERY_CACHE: usize = 256;

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("model", &self.config.model)
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

static ORT_LIBRARY: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();

/// Loads onnxruntime once per process; later calls must name the same library.
fn init_runtime(library: &Path) -> Result<()> {
    let loaded = ORT_LIBRARY.get_or_init(|| {
        if !library.is_file() {
            return Err(format!(
                "onnxruntime library not found at {}",
                library.display()
            ));
        }
        match ort::init_from(library) {
            Ok(builder) => {
                builder.commit();
                Ok(library.to_path_buf())
            }
            Err(e) => Err(format!(
                "cannot load onnxruntime from {}: {e}",
                library.display()
            )),
        }
    });
    match loaded {
        Ok(_) => Ok(()),
        Err(e) => Err(CoreError::Model(e.clone())),
    }
}

fn model_err(what: &str, path: &Path, e: impl std::fmt::Display) -> CoreError {
    CoreError::Model(format!("{what} {}: {e}", path.display()))
}

/// Hex sha256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Embedder {
    /// Loads the tokenizer and model; any problem is a [`CoreError::Model`].
    pub fn load(config: EmbedderConfig) -> Result<Embedder> {
        if config.max_tokens < 8 || config.batch_size == 0 || config.sessions == 0 {
            return Err(CoreError::invalid(
                "max_tokens must be >= 8, batch_size and sessions >= 1",
            ));
        }
        for (what, path) in [("model", &config.model), ("tokenizer", &config.tokenizer)] {
            if !path.is_file() {
                return Err(model_err(
                    &format!("{what} file not found:"),
                    path,
                    "missing",
                ));
            }
        }
        // The tokenizer loads beside the model's checksum and session.
        let (tokenizer, sessions) = std::thread::scope(|scope| {
            let tokenizer = scope.spawn(|| load_tokenizer(&config));
            let sessions = load_sessions(&config);
            (
                tokenizer.join().expect("tokenizer loading panicked"),
                sessions,
            )
        });
        let sessions = sessions?;
        let tokenizer = tokenizer?;
        let embedder = Embedder {
            tokenizer,
            sessions,
            config,
            queries: Mutex::new(VecDeque::with_capacity(QUERY_CACHE)),
            query_counts: (AtomicUsize::new(0), AtomicUsize::new(0)),
        };
        // Fail now, not on first use, if the graph does not produce what we expect.
        embedder.embed(&["probe"])?;
        Ok(embedder)
    }

    /// The configuration this embedder was loaded with.
    pub fn config(&self) -> &EmbedderConfig {
        &self.config
    }

    /// Token counts (after truncation) of each text.
    pub fn token_counts<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<usize>> {
        Ok(self.encode(texts)?.iter().map(Encoding::len).collect())
    }

    fn encode<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Encoding>> {
        let inputs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        self.tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| CoreError::Model(format!("tokenization failed: {e}")))
    }

    /// The vector of one search query, from the cache of recent queries when it is
    /// there.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        let lock = || self.queries.lock().unwrap_or_else(|p| p.into_inner());
        {
            let mut recent = lock();
            if let Some(i) = recent.iter().position(|(q, _)| q == query) {
                let entry = recent.remove(i).expect("position is in range");
                let vector = entry.1.clone();
                recent.push_back(entry);
                self.query_counts.1.fetch_add(1, Ordering::Relaxed);
                return Ok(vector);
            }
        }
        let vector = self
            .embed(&[query])?
            .pop()
            .ok_or_else(|| CoreError::Model("the model returned no vector".into()))?;
        self.query_counts.0.fetch_add(1, Ordering::Relaxed);
        let mut recent = lock();
        if recent.len() == QUERY_CACHE {
            recent.pop_front();
        }
        recent.push_back((query.to_owned(), vector.clone()));
        Ok(vector)
    }

    /// How many queries [`Embedder::embed_query`] embedded, and how many it answered from
    /// the recent query vectors.
    pub fn query_counts(&self) -> (usize, usize) {
        (
            self.query_counts.0.load(Ordering::Relaxed),
            self.query_counts.1.load(Ordering::Relaxed),
        )
    }

    /// Unit-length vectors for `texts`, in input order.
    pub fn embed<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self.encode(texts)?;
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encodings[i].len()));
        let batches: Vec<&[usize]> = order.chunks(self.config.batch_size).collect();
        let results: Vec<Mutex<Vec<f32>>> =
            (0..texts.len()).map(|_| Mutex::new(Vec::new())).collect();
        let next = AtomicUsize::new(0);
        let run = |session: &Mutex<Session>| -> Result<()> {
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                let Some(batch) = batches.get(b) else {
                    return Ok(());
                };
                let mut session = session.lock().unwrap_or_else(|p| p.into_inner());
                let vectors = run_batch(&mut session, batch.iter().map(|&i| &encodings[i]))?;
                for (&i, v) in batch.iter().zip(vectors) {
                    *results[i].lock().unwrap_or_else(|p| p.into_inner()) = v;
                }
            }
        };
        if self.sessions.len() == 1 || batches.len() == 1 {
            run(&self.sessions[0])?;
        } else {
            std::thread::scope(|s| {
                let workers: Vec<_> = self
                    .sessions
                    .iter()
                    .map(|sess| s.spawn(|| run(sess)))
                    .collect();
                workers
                    .into_iter()
                    .try_for_each(|w| w.join().expect("embedding thread panicked"))
            })?;
        }
        Ok(results
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
            .collect())
    }
}

/// The tokenizer, truncating at the configured token count.
fn load_tokenizer(config: &EmbedderConfig) -> Result<Tokenizer> {
    let mut tokenizer = Tokenizer::from_file(&config.tokenizer)
        .map_err(|e| model_err("cannot read tokenizer", &config.tokenizer, e))?;
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: config.max_tokens,
            ..TruncationParams::default()
        }))
        .map_err(|e| model_err("cannot configure tokenizer", &config.tokenizer, e))?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}

/// The model's sessions, from the kept optimised graph when there is one (else from the
/// model, after checking its sha256).
///
/// The kept graph is found by the model file's identity (path, size, modification time)
/// and the expected checksum, so a load that finds it neither reads nor hashes the
/// model. The model was checked when the graph was made from it; a model file
/// replaced since has another identity, and is read and checked again.
fn load_sessions(config: &EmbedderConfig) -> Result<Vec<Mutex<Session>>> {
    init_runtime(&config.ort_library)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if config.threads > 0 {
        config.threads
    } else {
        (cores / config.sessions).max(1)
    };
    let cache = config
        .cache_dir
        .as_deref()
        .map(|dir| GraphCache::new(dir, config));
    if let Some(loaded) = cache.as_ref().and_then(|c| c.load(config, threads)) {
        return Ok(loaded);
    }
    let model = std::fs::read(&config.model).map_err(|e| CoreError::io(&config.model, e))?;
    if let Some(expected) = &config.sha256 {
        let actual = sha256_hex(&model);
        if !actual.eq_ignore_ascii_case(expected) {
            return Err(CoreError::Model(format!(
                "{} has sha256 {actual}, expected {expected}: the file is corrupt or a different model",
                config.model.display()
            )));
        }
    }
    let save = cache.as_ref().map(GraphCache::save);
    let sessions = (0..config.sessions)
        .map(|i| {
            let save = if i == 0 { save.as_ref() } else { None };
            let graph = Graph::Bytes {
                graph: &model,
                model: &config.model,
            };
            new_session(graph, threads, save).map(Mutex::new)
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some(cache) = &cache {
        cache.forget_others();
    }
    Ok(sessions)
}

/// Where a session's graph comes from.
#[derive(Clone, Copy)]
enum Graph<'a> {
    /// The model's bytes; `model` names it in errors.
    Bytes { graph: &'a [u8], model: &'a Path },
    /// A graph file onnxruntime reads itself (a kept optimised graph), mapping the
    /// weights it keeps in a file apart (`kept.rs`).
    File(&'a Path),
}

/// An onnxruntime session for `graph`; with `save`, onnxruntime also writes its optimised
/// graph, which is then published ([`Save::publish`]).
fn new_session(graph: Graph<'_>, threads: usize, save: Option<&Save>) -> Result<Session> {
    let model = match graph {
        Graph::Bytes { model, .. } => model,
        Graph::File(path) => path,
    };
    let err = |e: ort::Error<_>| model_err("cannot load model", model, e);
    let mut builder = Session::builder()
        .map_err(|e| model_err("cannot create an onnxruntime session for", model, e))?;
    if let Some(save) = save {
        builder = save.configure(builder)?;
    }
    let mut builder = builder
        .with_optimization_level(GraphOptimizationLevel::All)
        .map_err(err)?
        .with_intra_threads(threads)
        .map_err(err)?
        .with_inter_threads(1)
        .map_err(err)?
        // Idle pool threads sleep instead of spinning: spinning costs a query embedding
        // far more CPU time, taken from the other processes on a small machine.
        .with_intra_op_spinning(false)
        .map_err(err)?
        .with_inter_op_spinning(false)
        .map_err(err)?;
    let session = match graph {
        Graph::Bytes { graph, .. } => builder.commit_from_memory(graph),
        Graph::File(path) => builder.commit_from_file(path),
    }
    .map_err(|e| model_err("cannot load model", model, e))?;
    if let Some(save) = save {
        save.publish();
    }
    Ok(session)
}

/// Runs one padded batch and mean-pools the last hidden state.
fn run_batch<'a>(
    session: &mut Session,
    batch: impl Iterator<Item = &'a Encoding> + Clone,
) -> Result<Vec<Vec<f32>>> {
    let rows = batch.clone().count();
    let width = batch.clone().map(Encoding::len).max().unwrap_or(1).max(1);
    let mut ids = vec![0i64; rows * width];
    let mut mask = vec![0i64; rows * width];
    let mut types = vec![0i64; rows * width];
    for (r, e) in batch.enumerate() {
        for (c, ((&id, &m), &t)) in e
            .get_ids()
            .iter()
            .zip(e.get_attention_mask())
            .zip(e.get_type_ids())
            .enumerate()
        {
            ids[r * width + c] = i64::from(id);
            mask[r * width + c] = i64::from(m);
            types[r * width + c] = i64::from(t);
        }
    }
    let shape = vec![rows as i64, width as i64];
    let tensor = |data: Vec<i64>| {
        Tensor::from_array((shape.clone(), data)).map_err(|e| CoreError::Model(e.to_string()))
    };
    let inputs = ort::inputs![
        "input_ids" => tensor(ids)?,
        "attention_mask" => tensor(mask.clone())?,
        "token_type_ids" => tensor(types)?,
    ];
    let outputs = session
        .run(inputs)
        .map_err(|e| CoreError::Model(format!("inference failed: {e}")))?;
    let (out_shape, hidden) = outputs[0]
        .try_extract_tensor::<f32>()
        .map_err(|e| CoreError::Model(format!("unexpected model output: {e}")))?;
    let dims: Vec<i64> = out_shape.iter().copied().collect();
    if dims != [rows as i64, width as i64, DIM as i64] {
        return Err(CoreError::Model(format!(
            "model output has shape {dims:?}, expected [{rows}, {width}, {DIM}]"
        )));
    }
    Ok((0..rows)
        .map(|r| {
            mean_pool(
                &hidden[r * width * DIM..(r + 1) * width * DIM],
                &mask[r * width..(r + 1) * width],
            )
        })
        .collect())
}

/// Mean of the token vectors the mask keeps, scaled to unit length.
fn mean_pool(hidden: &[f32], mask: &[i64]) -> Vec<f32> {
    let mut sum = vec![0f32; DIM];
    let mut n = 0f32;
    for (token, &m) in hidden.chunks_exact(DIM).zip(mask) {
        if m != 0 {
            sum.iter_mut().zip(token).for_each(|(s, x)| *s += x);
            n += 1.0;
        }
    }
    let n = n.max(1.0);
    sum.iter_mut().for_each(|s| *s /= n);
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    sum.iter_mut().for_each(|s| *s /= norm);
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_pool_ignores_masked_tokens_and_normalises() {
        let mut hidden = vec![0f32; 2 * DIM];
        hidden[0] = 3.0;
        hidden[DIM] = 100.0; // masked out
        let v = mean_pool(&hidden, &[1, 0]);
        assert!((v[0] - 1.0).abs() < 1e-6);
        assert!(v[1..].iter().all(|&x| x == 0.0));
    }

    #[test]
    fn missing_files_are_model_errors() {
        let cfg = EmbedderConfig::new(
            "/nonexistent/libonnxruntime.so",
            "/nonexistent/model.onnx",
            "/nonexistent/tokenizer.json",
        );
        assert!(matches!(Embedder::load(cfg), Err(CoreError::Model(_))));
    }
}
