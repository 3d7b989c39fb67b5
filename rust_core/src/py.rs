//! Python bindings (`backtrail._core`). Each method only converts: extract arguments,
//! release the GIL, call the core, map the error, convert the result.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::doc::{Document, Kind};
use crate::embed::{Embedder as CoreEmbedder, EmbedderConfig};
use crate::error::CoreError;
use crate::index::{Hit, Index as CoreIndex, Mode, Op, OpenOptions, SearchOptions, SearchRequest};
use crate::manifest::Quantization;
use crate::rank::Fusion;
use crate::text::query::Filters;

create_exception!(
    _core,
    PyCoreError,
    PyException,
    "Root of every error raised by the core."
);
create_exception!(
    _core,
    InvalidArgument,
    PyCoreError,
    "A document, filter or option the core cannot accept."
);
create_exception!(
    _core,
    LockTimeout,
    PyCoreError,
    "The cross-process write lock was not acquired in time."
);
create_exception!(
    _core,
    IndexCorrupt,
    PyCoreError,
    "The index directory cannot be read."
);
create_exception!(
    _core,
    ModelError,
    PyCoreError,
    "The embedding model, tokenizer or onnxruntime is unusable."
);
create_exception!(
    _core,
    CoreIOError,
    PyCoreError,
    "An operating-system error while reading or writing the index."
);

fn to_py(e: CoreError) -> PyErr {
    let msg = e.to_string();
    match e {
        CoreError::InvalidArgument(_) => InvalidArgument::new_err(msg),
        CoreError::LockTimeout { .. } => LockTimeout::new_err(msg),
        CoreError::IndexCorrupt { .. } => IndexCorrupt::new_err(msg),
        CoreError::Model(_) => ModelError::new_err(msg),
        CoreError::Io { .. } => CoreIOError::new_err(msg),
        CoreError::Tantivy(_) | CoreError::Vectors(_) => PyCoreError::new_err(msg),
    }
}

fn invalid(msg: impl Into<String>) -> PyErr {
    InvalidArgument::new_err(msg.into())
}

/// all-MiniLM-L6-v2 through onnxruntime.
#[pyclass(frozen, name = "Embedder", module = "backtrail._core")]
pub struct PyEmbedder {
    inner: Arc<CoreEmbedder>,
}

#[pymethods]
impl PyEmbedder {
    #[new]
    #[pyo3(signature = (ort_library, model_path, tokenizer_path, *, sha256=None, threads=0, sessions=1, max_tokens=256, batch_size=16, cache_dir=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        ort_library: PathBuf,
        model_path: PathBuf,
        tokenizer_path: PathBuf,
        sha256: Option<String>,
        threads: usize,
        sessions: usize,
        max_tokens: usize,
        batch_size: usize,
        cache_dir: Option<PathBuf>,
    ) -> PyResult<Self> {
        let mut config = EmbedderConfig::new(ort_library, model_path, tokenizer_path);
        config.cache_dir = cache_dir;
        config.sha256 = sha256;
        config.threads = threads;
        config.sessions = sessions;
        config.max_tokens = max_tokens;
        config.batch_size = batch_size;
        let inner = py.detach(|| CoreEmbedder::load(config)).map_err(to_py)?;
        Ok(PyEmbedder {
            inner: Arc::new(inner),
        })
    }

    #[getter]
    fn dim(&self) -> usize {
        crate::DIM
    }

    #[getter]
    fn max_tokens(&self) -> usize {
        self.inner.config().max_tokens
    }

    /// (queries embedded by searches, queries answered from the recent query vectors).
    #[getter]
    fn query_counts(&self) -> (usize, usize) {
        self.inner.query_counts()
    }

    fn embed(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<f32>>> {
        py.detach(|| self.inner.embed(&texts)).map_err(to_py)
    }

    fn token_counts(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<usize>> {
        py.detach(|| self.inner.token_counts(&texts)).map_err(to_py)
    }
}

/// One index directory, shared by many processes.
#[pyclass(frozen, name = "Index", module = "backtrail._core")]
pub struct PyIndex {
    inner: Arc<CoreIndex>,
    embedder: Option<Arc<CoreEmbedder>>,
    #[pyo3(get)]
    path: String,
}

#[pymethods]
impl PyIndex {
    #[new]
    #[pyo3(signature = (path, *, embedder=None, lock_timeout=30.0, quantization=None, connectivity=None, expansion_add=None, expansion_search=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        embedder: Option<PyRef<'_, PyEmbedder>>,
        lock_timeout: f64,
        quantization: Option<String>,
        connectivity: Option<usize>,
        expansion_add: Option<usize>,
        expansion_search: Option<usize>,
    ) -> PyResult<Self> {
        if !(lock_timeout.is_finite() && lock_timeout >= 0.0) {
            return Err(invalid(
                "lock_timeout must be a non-negative number of seconds",
            ));
        }
        let mut options = OpenOptions {
            lock_timeout: Duration::from_secs_f64(lock_timeout),
            ..OpenOptions::default()
        };
        if let Some(q) = quantization {
            options.quantization = Quantization::parse(&q).map_err(to_py)?;
        }
        options.connectivity = connectivity.unwrap_or(options.connectivity);
        options.expansion_add = expansion_add.unwrap_or(options.expansion_add);
        options.expansion_search = expansion_search.unwrap_or(options.expansion_search);
        let display = path.to_string_lossy().into_owned();
        let inner = py
            .detach(|| CoreIndex::open(&path, options))
            .map_err(to_py)?;
        Ok(PyIndex {
            inner: Arc::new(inner),
            embedder: embedder.map(|e| Arc::clone(&e.inner)),
            path: display,
        })
    }

    fn upsert(&self, docs: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut ops = Vec::new();
        for (i, item) in docs.try_iter()?.enumerate() {
            let item = item?;
            let dict = item
                .cast::<PyDict>()
                .map_err(|_| invalid(format!("document {i} is not a dict")))?;
            ops.push(Op::Upsert(
                document_from(dict).map_err(|e| invalid(format!("document {i}: {e}")))?,
            ));
        }
        self.inner.stage(ops).map_err(to_py)
    }

    fn delete_ids(&self, ids: Vec<u64>) -> PyResult<()> {
        self.inner.stage([Op::DeleteIds(ids)]).map_err(to_py)
    }

    fn delete_parents(&self, ids: Vec<u64>) -> PyResult<()> {
        self.inner.stage([Op::DeleteParents(ids)]).map_err(to_py)
    }

    fn touch(&self, updates: Vec<(u64, i64, u64)>) -> PyResult<()> {
        let ops = updates
            .into_iter()
            .map(|(parent, last_seen, visits)| Op::Touch {
                parent,
                last_seen,
                visits,
            });
        self.inner.stage(ops).map_err(to_py)
    }

    fn delete_url(&self, url: String) -> PyResult<()> {
        self.inner.stage([Op::DeleteUrl(url)]).map_err(to_py)
    }

    fn delete_domain(&self, domain: String) -> PyResult<()> {
        self.inner.stage([Op::DeleteDomain(domain)]).map_err(to_py)
    }

    #[pyo3(signature = (since, until))]
    fn delete_range(&self, since: Option<i64>, until: Option<i64>) -> PyResult<()> {
        self.inner
            .stage([Op::DeleteRange(since, until)])
            .map_err(to_py)
    }

    fn delete_all(&self) -> PyResult<()> {
        self.inner.stage([Op::DeleteAll]).map_err(to_py)
    }

    fn clear_vectors(&self) -> PyResult<()> {
        self.inner.stage([Op::ClearVectors]).map_err(to_py)
    }

    fn pending(&self) -> usize {
        self.inner.pending()
    }

    #[pyo3(signature = (watermark=None))]
    fn commit(&self, py: Python<'_>, watermark: Option<String>) -> PyResult<u64> {
        py.detach(|| self.inner.commit(watermark)).map_err(to_py)
    }

    fn rollback(&self) {
        self.inner.rollback();
    }

    fn watermark(&self, py: Python<'_>) -> PyResult<Option<String>> {
        py.detach(|| self.inner.watermark()).map_err(to_py)
    }

    fn reload(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.reload()).map_err(to_py)
    }

    fn get<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Option<Bound<'py, PyDict>>> {
        let doc = py.detach(|| self.inner.get(id)).map_err(to_py)?;
        doc.map(|d| document_to(py, &d)).transpose()
    }

    #[pyo3(signature = (query, k=10, *, kinds=None, domains=None, since=None, until=None, now=None, mode="hybrid", query_vector=None, embedder=None, options=None))]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: String,
        k: usize,
        kinds: Option<Vec<String>>,
        domains: Option<Vec<String>>,
        since: Option<i64>,
        until: Option<i64>,
        now: Option<i64>,
        mode: &str,
        query_vector: Option<Vec<f32>>,
        embedder: Option<PyRef<'py, PyEmbedder>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mode = Mode::parse(mode).map_err(to_py)?;
        let filters = Filters {
            kinds: kinds
                .unwrap_or_default()
                .iter()
                .map(|k| Kind::parse(k))
                .collect::<Result<_, _>>()
                .map_err(to_py)?,
            domains: domains.unwrap_or_default(),
            since,
            until,
        };
        let options = options.map(search_options).transpose()?.unwrap_or_default();
        let embedder = embedder
            .map(|e| Arc::clone(&e.inner))
            .or_else(|| self.embedder.clone());
        let hits = py
            .detach(|| {
                self.inner.search(&SearchRequest {
                    query: &query,
                    k,
                    filters,
                    now: now.unwrap_or_else(crate::index::now),
                    mode,
                    query_vector: query_vector.as_deref(),
                    embedder: embedder.as_deref(),
                    exclude_parent: None,
                    options,
                })
            })
            .map_err(to_py)?;
        hits_to(py, &hits)
    }

    #[pyo3(signature = (id, k=10, *, exclude_parent=true))]
    fn similar<'py>(
        &self,
        py: Python<'py>,
        id: u64,
        k: usize,
        exclude_parent: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let hits = py
            .detach(|| {
                self.inner
                    .similar(id, k, exclude_parent, SearchOptions::default())
            })
            .map_err(to_py)?;
        hits_to(py, &hits)
    }

    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.compact()).map_err(to_py)
    }

    fn needs_vector_merge(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.inner.needs_vector_merge()).map_err(to_py)
    }

    fn merge_vectors(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.inner.merge_vectors()).map_err(to_py)
    }

    fn stop_merging(&self) {
        self.inner.stop_merging();
    }

    fn documents(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.inner.documents()).map_err(to_py)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = py.detach(|| self.inner.stats()).map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("documents", s.documents)?;
        d.set_item("text_segments", s.text_segments)?;
        d.set_item("vector_segments", s.vector_segments)?;
        d.set_item("vectors", s.vectors)?;
        d.set_item("documents_with_vectors", s.documents_with_vectors)?;
        d.set_item("disk_bytes", s.disk_bytes)?;
        d.set_item("watermark", s.watermark)?;
        d.set_item("pending", s.pending)?;
        Ok(d)
    }
}

/// Reads one optional field of a document dict.
fn field<'py, T>(d: &Bound<'py, PyDict>, name: &str) -> PyResult<Option<T>>
where
    T: for<'a> FromPyObject<'a, 'py>,
    for<'a> <T as FromPyObject<'a, 'py>>::Error: Into<PyErr>,
{
    match d.get_item(name)? {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => v.extract::<T>().map(Some).map_err(|e| {
            invalid(format!(
                "field {name:?} has the wrong type or value: {}",
                e.into()
            ))
        }),
    }
}

const DOC_FIELDS: [&str; 13] = [
    "id",
    "kind",
    "url",
    "domain",
    "title",
    "body",
    "section",
    "parent",
    "first_seen",
    "last_seen",
    "visits",
    "language",
    "vector",
];

fn document_from(d: &Bound<'_, PyDict>) -> PyResult<Document> {
    for key in d.keys() {
        let key: String = key
            .extract()
            .map_err(|_| invalid("document keys must be strings"))?;
        if !DOC_FIELDS.contains(&key.as_str()) {
            return Err(invalid(format!("unknown field {key:?}")));
        }
    }
    let id: u64 = field(d, "id")?.ok_or_else(|| invalid("missing \"id\""))?;
    let kind: String = field(d, "kind")?.ok_or_else(|| invalid("missing \"kind\""))?;
    let mut doc = Document::new(id, Kind::parse(&kind).map_err(to_py)?);
    doc.url = field(d, "url")?.unwrap_or_default();
    doc.domain = field(d, "domain")?.unwrap_or_default();
    doc.title = field(d, "title")?.unwrap_or_default();
    doc.body = field(d, "body")?.unwrap_or_default();
    doc.section = field(d, "section")?.unwrap_or_default();
    doc.parent = field(d, "parent")?.unwrap_or(0);
    doc.first_seen = field(d, "first_seen")?.unwrap_or(0);
    doc.last_seen = field(d, "last_seen")?.unwrap_or(doc.first_seen);
    doc.visits = field(d, "visits")?.unwrap_or(0);
    doc.language = field(d, "language")?.unwrap_or_default();
    doc.vector = field(d, "vector")?;
    Ok(doc)
}

fn document_to<'py>(py: Python<'py>, doc: &Document) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", doc.id)?;
    d.set_item("kind", doc.kind.name())?;
    d.set_item("url", &doc.url)?;
    d.set_item("domain", &doc.domain)?;
    d.set_item("title", &doc.title)?;
    d.set_item("body", &doc.body)?;
    d.set_item("section", &doc.section)?;
    d.set_item("parent", doc.parent)?;
    d.set_item("first_seen", doc.first_seen)?;
    d.set_item("last_seen", doc.last_seen)?;
    d.set_item("visits", doc.visits)?;
    d.set_item("language", &doc.language)?;
    if let Some(v) = &doc.vector {
        d.set_item("vector", v)?;
    }
    Ok(d)
}

fn hits_to<'py>(py: Python<'py>, hits: &[Hit]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for h in hits {
        let d = document_to(py, &h.doc)?;
        d.del_item("body")?;
        let e = &h.explanation;
        d.set_item("score", e.score)?;
        d.set_item("snippet", &h.snippet)?;
        let x = PyDict::new(py);
        x.set_item("bm25_rank", e.bm25.map(|b| b.0))?;
        x.set_item("bm25_score", e.bm25.map(|b| b.1))?;
        x.set_item("vector_rank", e.vector_rank)?;
        x.set_item("vector_similarity", e.similarity)?;
        x.set_item("coverage", e.coverage)?;
        x.set_item("bm25_weight", e.bm25_weight)?;
        x.set_item("fusion", e.fusion)?;
        x.set_item("duplicate_of", e.duplicate_of)?;
        x.set_item("decay", e.decay)?;
        x.set_item("visit_boost", e.visit_boost)?;
        x.set_item("score", e.score)?;
        d.set_item("explanation", x)?;
        let passages = PyList::empty(py);
        for p in &h.passages {
            let pd = PyDict::new(py);
            pd.set_item("id", p.id)?;
            pd.set_item("snippet", &p.snippet)?;
            pd.set_item("score", p.score)?;
            passages.append(pd)?;
        }
        d.set_item("passages", passages)?;
        list.append(d)?;
    }
    Ok(list)
}

fn search_options(d: &Bound<'_, PyDict>) -> PyResult<SearchOptions> {
    let mut o = SearchOptions::default();
    for (key, value) in d.iter() {
        let key: String = key
            .extract()
            .map_err(|_| invalid("option names must be strings"))?;
        let bad = |e: PyErr| invalid(format!("option {key:?}: {e}"));
        match key.as_str() {
            "bm25_candidates" => o.bm25_candidates = value.extract().map_err(bad)?,
            "vector_candidates" => o.vector_candidates = value.extract().map_err(bad)?,
            "fusion" => {
                o.rank.fusion = match value.extract::<String>().map_err(bad)?.as_str() {
                    "convex" => Fusion::Convex,
                    "rrf" => Fusion::Rrf,
                    "zscore" => Fusion::Zscore,
                    other => {
                        return Err(invalid(format!(
                            "fusion must be \"convex\", \"zscore\" or \"rrf\", not {other:?}"
                        )))
                    }
                }
            }
            "bm25_weight" => o.rank.bm25_weight = value.extract().map_err(bad)?,
            "rrf_k" => o.rank.rrf_k = value.extract().map_err(bad)?,
            "vector_z_clip" => o.rank.vector_z_clip = value.extract().map_err(bad)?,
            "coverage_weighting" => o.rank.coverage_weighting = value.extract().map_err(bad)?,
            "coverage_depth" => o.coverage_depth = value.extract().map_err(bad)?,
            "title_boost" => o.title_boost = value.extract().map_err(bad)?,
            "section_boost" => o.section_boost = value.extract().map_err(bad)?,
            "drop_stop_words" => o.drop_stop_words = value.extract().map_err(bad)?,
            "proximity_boost" => o.proximity_boost = value.extract().map_err(bad)?,
            "common_word_share" => o.common_word_share = value.extract().map_err(bad)?,
            "decay_half_life_days" => o.rank.decay_half_life_days = value.extract().map_err(bad)?,
            "decay_floor" => o.rank.decay_floor = value.extract().map_err(bad)?,
            "visit_weight" => o.rank.visit_weight = value.extract().map_err(bad)?,
            "duplicate_similarity" => o.rank.duplicate_similarity = value.extract().map_err(bad)?,
            "group" => o.group = value.extract().map_err(bad)?,
            "passages_per_hit" => o.passages_per_hit = value.extract().map_err(bad)?,
            "expansion" => o.expansion = value.extract().map_err(bad)?,
            "snippet_chars" => o.snippet_chars = value.extract().map_err(bad)?,
            "markers" => o.markers = value.extract().map_err(bad)?,
            other => return Err(invalid(format!("unknown search option {other:?}"))),
        }
    }
    Ok(o)
}

/// The `backtrail._core` module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("DIM", crate::DIM)?;
    m.add("MAX_ID", crate::MAX_ID)?;
    m.add("KINDS", Kind::ALL.map(Kind::name).to_vec())?;
    m.add("CoreError", py.get_type::<PyCoreError>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("LockTimeout", py.get_type::<LockTimeout>())?;
    m.add("IndexCorrupt", py.get_type::<IndexCorrupt>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("CoreIOError", py.get_type::<CoreIOError>())?;
    m.add_class::<PyEmbedder>()?;
    m.add_class::<PyIndex>()?;
    Ok(())
}
