//! onnxruntime's optimised graph of a model, kept on disk between loads.
//!
//! A kept graph is two files. `<stem>-split.onnx` holds the graph, a few kilobytes, and
//! names the file of its weights, `<stem>-split.<writer>.weights`: onnxruntime folds the
//! int8 weights' dequantisation into float32 constants, so they are several times the
//! model's size. onnxruntime maps a graph's external weights into memory where a graph
//! holding its weights inline is read, parsed and copied, so a load from the kept graph is
//! faster and lighter (figures in `bench/README.md`), and processes running the model
//! share the mapped pages.
//!
//! Publishing: onnxruntime writes the weights under a name no other writer uses and the
//! graph under a temporary name; both are fsynced, then the graph is renamed into place.
//! Weights files are never rewritten, so a process that maps them never sees them change,
//! and a graph in place always names complete weights. A graph onnxruntime cannot load
//! (damaged, or its weights missing or short) is removed and built again.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use ort::session::builder::SessionBuilder;
use ort::session::Session;

use super::{new_session, sha256_hex, EmbedderConfig, Graph};
use crate::error::Result;

/// Weights and temporary files younger than this may belong to a graph another process is
/// writing right now, so they are not removed as strays.
const STRAY_AGE: Duration = Duration::from_secs(600);

/// The kept graphs of one model and onnxruntime library in one directory.
pub(super) struct GraphCache {
    /// `<dir>/minilm-<model identity>-<onnxruntime identity>`, completed by
    /// [`GraphCache::path`].
    stem: PathBuf,
}

impl GraphCache {
    pub(super) fn new(dir: &Path, config: &EmbedderConfig) -> GraphCache {
        let identity = |path: &Path| {
            std::fs::metadata(path).map_or((0, 0), |m| {
                let mtime = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                (m.len(), mtime)
            })
        };
        // A new onnxruntime may optimise differently (or not read an older graph).
        let (size, mtime) = identity(&config.ort_library);
        let runtime = size ^ ((mtime / 1_000_000_000) as u64).rotate_left(32);
        let (size, mtime) = identity(&config.model);
        let model = sha256_hex(
            format!(
                "{}\0{size}\0{mtime}\0{}",
                config.model.display(),
                config.sha256.as_deref().unwrap_or("")
            )
            .as_bytes(),
        );
        GraphCache {
            stem: dir.join(format!("minilm-{}-{runtime:016x}", &model[..16])),
        }
    }

    /// Where the graph is kept.
    pub(super) fn path(&self) -> PathBuf {
        let mut name = self.stem.clone().into_os_string();
        name.push("-split.onnx");
        PathBuf::from(name)
    }

    /// Sessions from the kept graph, if there is a usable one for this configuration.
    pub(super) fn load(
        &self,
        config: &EmbedderConfig,
        threads: usize,
    ) -> Option<Vec<Mutex<Session>>> {
        let path = self.path();
        if !path.is_file() {
            return None;
        }
        let sessions = (0..config.sessions)
            .map(|_| new_session(Graph::File(&path), threads, None).map(Mutex::new))
            .collect::<Result<Vec<_>>>();
        match sessions {
            Ok(sessions) => {
                self.forget_others();
                Some(sessions)
            }
            Err(_) => {
                // Built again by the caller. Another process may still map these weights;
                // its mapping outlives the name.
                for weights in weights_of(&path) {
                    let _ = std::fs::remove_file(weights);
                }
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// How the graph is written while its first session is made.
    pub(super) fn save(&self) -> Save {
        Save::new(self.path())
    }

    /// Removes what no kept graph of this model and runtime uses: the graphs and weights
    /// of other models or runtimes (after an upgrade nothing reads them again), graphs of
    /// earlier formats, weights a graph replaced since no
    /// longer names, and temporaries left by killed writers. This model's weights and
    /// temporaries younger than [`STRAY_AGE`] are left alone: a writer may be about to
    /// publish them.
    pub(super) fn forget_others(&self) {
        let Some(dir) = self.stem.parent() else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let stem = self.stem.file_name().unwrap_or_default().to_string_lossy();
        let mut keep: HashSet<OsString> = HashSet::new();
        let graph = self.path();
        if graph.is_file() {
            keep.extend(
                weights_of(&graph)
                    .into_iter()
                    .filter_map(|w| w.file_name().map(Into::into)),
            );
            keep.extend(graph.file_name().map(Into::into));
        }
        for entry in entries.flatten() {
            let name = entry.file_name();
            let text = name.to_string_lossy();
            if !text.starts_with("minilm-") || keep.contains(&name) {
                continue;
            }
            let in_flight = text.starts_with(&*stem)
                && (text.ends_with(".weights") || text.contains(".onnx.tmp"));
            let young = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_none_or(|age| age < STRAY_AGE);
            if in_flight && young {
                continue;
            }
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// One writing of a kept graph: onnxruntime saves the optimised graph while it makes a
/// session, and [`Save::publish`] puts it in place.
pub(super) struct Save {
    /// Where the graph goes.
    graph: PathBuf,
    /// Where onnxruntime writes it.
    tmp: PathBuf,
    /// The weights' file name, beside the graph and unique to this writer.
    weights: String,
}

impl Save {
    fn new(graph: PathBuf) -> Save {
        let stem = graph
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let nanos = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let weights = format!("{stem}.{}-{nanos:x}.weights", std::process::id());
        Save {
            tmp: crate::fsutil::tmp_path(&graph),
            graph,
            weights,
        }
    }

    /// `builder`, also saving its optimised graph, with the weights apart; `builder` as
    /// it is when the directory cannot be made.
    pub(super) fn configure(&self, builder: SessionBuilder) -> Result<SessionBuilder> {
        let dir = self.graph.parent().unwrap_or(Path::new("."));
        if std::fs::create_dir_all(dir).is_err() {
            return Ok(builder);
        }
        let err = |e: ort::Error<SessionBuilder>| {
            super::model_err("cannot keep the optimised graph at", &self.graph, e)
        };
        builder
            .with_optimized_model_path(&self.tmp)
            .map_err(err)?
            .with_config_entry(
                "session.optimized_model_external_initializers_file_name",
                &self.weights,
            )
            .map_err(err)?
            .with_config_entry(
                "session.optimized_model_external_initializers_min_size_in_bytes",
                "1024",
            )
            .map_err(err)
    }

    /// Puts the written graph in place once it and its weights are on disk. A cache that
    /// cannot be written only costs the next load its speed, so failures are dropped (with
    /// what was written).
    pub(super) fn publish(&self) {
        let weights = self.graph.with_file_name(&self.weights);
        let published = self.tmp.is_file()
            && weights.is_file()
            && crate::fsutil::sync_file(&weights).is_ok()
            && crate::fsutil::sync_file(&self.tmp).is_ok()
            && crate::fsutil::publish(&self.tmp, &self.graph).is_ok();
        if !published {
            let _ = std::fs::remove_file(&self.tmp);
            let _ = std::fs::remove_file(&weights);
        }
    }
}

/// The weights files `graph` names, beside the graph; none if it cannot be read. The
/// names are found as text in the graph's bytes (ONNX stores an external location as a
/// plain string): `<graph stem>.<writer>.weights`, each [`Save`] writer's own.
fn weights_of(graph: &Path) -> Vec<PathBuf> {
    let (Ok(bytes), Some(stem)) = (std::fs::read(graph), graph.file_stem()) else {
        return Vec::new();
    };
    let prefix = format!("{}.", stem.to_string_lossy());
    let (prefix, suffix) = (prefix.as_bytes(), b".weights".as_slice());
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let mut names = Vec::new();
    let mut rest = bytes.as_slice();
    while let Some(at) = find(rest, prefix) {
        rest = &rest[at..];
        // A writer's part is a process id and a time in hex, joined by '-'.
        let writer = rest[prefix.len()..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
            .count();
        let end = prefix.len() + writer;
        if writer > 0 && rest[end..].starts_with(suffix) {
            names.push(String::from_utf8_lossy(&rest[..end + suffix.len()]).into_owned());
        }
        rest = &rest[prefix.len()..];
    }
    names.sort();
    names.dedup();
    names.into_iter().map(|n| graph.with_file_name(n)).collect()
}
