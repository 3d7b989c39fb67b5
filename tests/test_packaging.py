"""What one install brings: the tokenizer shipped inside the package (with its license
and a checked sha256)."""

from __future__ import annotations

from pathlib import Path

import pytest

import backtrail
from backtrail.config import Config
from backtrail.indexer import embedding
from backtrail.service import health


def test_the_package_ships_the_tokenizer_with_its_license_notice_and_sha256() -> None:
    files = embedding.model_files()
    package = Path(backtrail.__file__).resolve().parent
    assert files.tokenizer == embedding.TOKENIZER
    assert package in files.tokenizer.parents  # inside backtrail, from no other package
    assert embedding.sha256_file(files.tokenizer) == embedding.TOKENIZER_SHA256
    folder = files.tokenizer.parent
    license_text = (folder / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    notice = (folder / "NOTICE.md").read_text(encoding="utf-8")
    assert "all-MiniLM-L6-v2" in notice and embedding.TOKENIZER_SHA256 in notice


def test_a_damaged_tokenizer_is_refused_before_it_loads_and_doctor_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    damaged = tmp_path / "tokenizer.json"
    damaged.write_bytes(embedding.TOKENIZER.read_bytes().replace(b"[UNK]", b"[UNQ]", 1))
    monkeypatch.setattr(embedding, "TOKENIZER", damaged)
    with pytest.raises(embedding.ModelFileDamaged, match=f"{damaged} has sha256"):
        embedding.load_embedder()
    config = Config.load(tmp_path / "data", overrides={"embeddings": True}, environ={})
    checks = {c["check"]: c for c in health.health_checks(config, load_model=True)}
    assert not checks["tokenizer file"]["ok"]
    assert checks["tokenizer file"]["fix"] == "pip install --force-reinstall backtrail"
    assert "embedder" not in checks  # a damaged file is not loaded at all
