"""Write the browser extension as a zip ready for a browser's store (``make dist``).

``python scripts/pack_extension.py [EXTENSION_DIR] [OUT_DIR]`` writes
``OUT_DIR/backtrail-extension-<version>.zip`` holding ``manifest.json``, ``icons/`` and
``src/``: what the browser loads, without the tests or the Node files. The manifest's
``"key"`` is left out, because the stores refuse it and assign their own ID: a
store-installed extension then needs ``backtrail install --extension-id <its ID>``. The
zip is the same bytes for the same files (entries sorted, fixed times).
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("icons", "src")
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def store_manifest(extension: Path) -> dict[str, object]:
    """The extension's manifest as a store takes it (no ``"key"``)."""
    manifest = json.loads((extension / "manifest.json").read_text(encoding="utf-8"))
    manifest.pop("key", None)
    return manifest


def pack(extension: Path = ROOT / "extension", out_dir: Path = ROOT / "dist") -> Path:
    """Write the zip; returns its path."""
    manifest = store_manifest(extension)
    files = sorted(
        path for folder in SHIPPED for path in (extension / folder).rglob("*") if path.is_file()
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"backtrail-extension-{manifest['version']}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        entries = [("manifest.json", (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))]
        entries += [(path.relative_to(extension).as_posix(), path.read_bytes()) for path in files]
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return target


if __name__ == "__main__":
    arguments = [Path(argument) for argument in sys.argv[1:3]]
    sys.stdout.write(f"{pack(*arguments)}\n")
