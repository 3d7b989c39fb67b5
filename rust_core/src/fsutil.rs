//! Durable file writes: published files are written to a temporary name, fsynced and
//! renamed, so a reader (or a process killed mid-write) never sees half a file.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{CoreError, Result};

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = tmp_path(path);
    let mut f = File::create(&tmp).map_err(|e| CoreError::io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| CoreError::io(&tmp, e))?;
    f.sync_all().map_err(|e| CoreError::io(&tmp, e))?;
    publish(&tmp, path)
}

/// Renames a finished temporary file into place and syncs the directory.
pub fn publish(tmp: &Path, path: &Path) -> Result<()> {
    fs::rename(tmp, path).map_err(|e| CoreError::io(path, e))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// fsyncs a file that was written by someone else (e.g. usearch's `save`).
pub fn sync_file(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| CoreError::io(path, e))
}

/// fsyncs a directory so renames in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| CoreError::io(dir, e))
}

/// The temporary name used while writing `path`.
pub fn tmp_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}", std::process::id()));
    path.with_file_name(name)
}
