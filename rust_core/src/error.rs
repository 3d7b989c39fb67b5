//! One error type for the whole core, so every failure has a message and the Python
//! binding can map each variant to its own exception class.

use std::path::PathBuf;

/// Everything that can go wrong inside the core.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// A caller passed a document, filter or option the core cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// Another writer held the cross-process write lock for longer than the timeout.
    #[error("could not acquire the index write lock at {path} within {seconds:.1} s (another process is writing)")]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long we waited.
        seconds: f64,
    },

    /// The index directory holds files the core cannot read.
    #[error("index at {path} is unreadable: {reason}")]
    IndexCorrupt {
        /// The index directory.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },

    /// The embedding model, tokenizer or onnxruntime library is missing or unusable.
    #[error("embedding model unavailable: {0}")]
    Model(String),

    /// An operating-system error, with the path it concerned.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },

    /// An error reported by Tantivy.
    #[error("text index error: {0}")]
    Tantivy(#[from] tantivy::TantivyError),

    /// An error reported by usearch.
    #[error("vector index error: {0}")]
    Vectors(String),
}

/// Result alias used throughout the core.
pub type Result<T> = std::result::Result<T, CoreError>;

impl CoreError {
    /// Wraps an I/O error with the path it concerned.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CoreError::Io {
            path: path.into(),
            source,
        }
    }

    /// Shorthand for [`CoreError::InvalidArgument`].
    pub fn invalid(message: impl Into<String>) -> Self {
        CoreError::InvalidArgument(message.into())
    }
}

impl From<cxx::Exception> for CoreError {
    fn from(e: cxx::Exception) -> Self {
        CoreError::Vectors(e.what().to_string())
    }
}
