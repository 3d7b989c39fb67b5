//! The cross-process write lock. Tantivy allows one writer per directory in the whole
//! machine, and our vector segments and manifest must change together with the text
//! index, so every commit runs under this lock, held for one batch only.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{CoreError, Result};

/// Serialises writers inside this process before they compete for the file lock, so
/// threads of one process queue instead of polling.
static PROCESS_WRITERS: Mutex<()> = Mutex::new(());

/// An exclusive lock on `<dir>/.backtrail-write.lock`, released on drop (or by the
/// kernel if the process dies).
pub struct WriteLock {
    file: File,
    _in_process: MutexGuard<'static, ()>,
}

impl WriteLock {
    /// File name of the lock inside an index directory.
    pub const FILE_NAME: &'static str = ".backtrail-write.lock";

    /// Waits up to `timeout` for the lock.
    pub fn acquire(dir: &Path, timeout: Duration) -> Result<WriteLock> {
        let path = dir.join(Self::FILE_NAME);
        let started = Instant::now();
        let guard = loop {
            match PROCESS_WRITERS.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    wait_or_fail(&path, started, timeout)?;
                }
            }
        };
        let file = open_lock_file(&path)?;
        loop {
            match file.try_lock() {
                Ok(()) => {
                    return Ok(WriteLock {
                        file,
                        _in_process: guard,
                    })
                }
                Err(TryLockError::WouldBlock) => wait_or_fail(&path, started, timeout)?,
                Err(TryLockError::Error(e)) => return Err(CoreError::io(&path, e)),
            }
        }
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// An exclusive lock on `path` if no other holder has it now, released when the returned
/// file is dropped (or by the kernel if the process dies); `None` if it is taken.
pub fn try_lock(path: &Path) -> Result<Option<File>> {
    let file = open_lock_file(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(CoreError::io(path, e)),
    }
}

fn open_lock_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| CoreError::io(path, e))
}

fn wait_or_fail(path: &Path, started: Instant, timeout: Duration) -> Result<()> {
    let waited = started.elapsed();
    if waited >= timeout {
        return Err(CoreError::LockTimeout {
            path: PathBuf::from(path),
            seconds: waited.as_secs_f64(),
        });
    }
    // Back off from 1 ms to 20 ms: commits are short, so most waits end quickly.
    let pause = Duration::from_millis((1 + waited.as_millis() as u64 / 10).min(20));
    std::thread::sleep(pause.min(timeout - waited));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_times_out_while_first_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let first = WriteLock::acquire(dir.path(), Duration::from_secs(1)).unwrap();
        let err = std::thread::scope(|s| {
            s.spawn(|| WriteLock::acquire(dir.path(), Duration::from_millis(50)).err())
                .join()
                .unwrap()
        });
        assert!(matches!(err, Some(CoreError::LockTimeout { .. })));
        drop(first);
        assert!(WriteLock::acquire(dir.path(), Duration::from_millis(50)).is_ok());
    }

    #[test]
    fn try_lock_gives_none_while_another_holder_has_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("merge.lock");
        let held = try_lock(&path).unwrap().expect("free at first");
        assert!(try_lock(&path).unwrap().is_none());
        drop(held);
        assert!(try_lock(&path).unwrap().is_some());
    }
}
