"""The extension zip of ``make dist``, as a store would install it: without the pinned
key it gets another ID, runs in real headless Chromium, and reaches the native host
once ``backtrail install --extension-id`` allows that ID."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from e2e_browser_support import Browser, ChromiumMissing, find_chromium
from e2e_cdp_support import ServiceWorker
from e2e_support import EXTENSION_ID, Profile, wait_for

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
BACKTRAIL = str(Path(sys.executable).with_name("backtrail"))
sys.path.insert(0, str(ROOT / "scripts"))
import pack_extension  # noqa: E402


@pytest.fixture(autouse=True)
def chromium() -> None:
    try:
        find_chromium()
    except ChromiumMissing as missing:
        pytest.skip(str(missing))


def unpacked_id(path: Path) -> str:
    """The ID Chromium gives an unpacked extension without a key: the first 128 bits of
    the sha256 of its absolute path, each hex digit written as a letter a-p."""
    digest = hashlib.sha256(str(path).encode("utf-8")).hexdigest()[:32]
    return digest.translate(str.maketrans("0123456789abcdef", "abcdefghijklmnop"))


def test_the_store_zip_runs_in_chromium_and_reaches_a_host_registered_for_its_id(
    tmp_path: Path,
) -> None:
    unpacked = tmp_path / "store-build"
    with zipfile.ZipFile(pack_extension.pack(ROOT / "extension", tmp_path / "dist")) as archive:
        archive.extractall(unpacked)
    store_id = unpacked_id(unpacked)
    assert store_id != EXTENSION_ID
    profile = Profile.create(tmp_path / "e2e")  # registered for the pinned ID only
    done = subprocess.run(
        [BACKTRAIL, "install", "--browser", "chromium", "--user-data-dir",
         str(profile.user_data_dir), "--data-dir", str(profile.data_dir),
         "--extension-id", store_id],
        env=profile.env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with Browser.launch(profile, extension_dir=unpacked) as browser:
        script = f"chrome-extension://{store_id}/src/background.js"

        def worker_target() -> dict | None:
            return next((t for t in browser.targets("service_worker") if t["url"] == script), None)

        target = wait_for(worker_target, 30, "the store build's service worker")
        worker = browser.attach(target["targetId"], ServiceWorker)
        worker.send("Runtime.enable")
        wait_for(lambda: worker.evaluate("globalThis.__backtrail?.ready === true"), 30,
                 "the store build's test hook")  # fmt: skip
        state = worker.wait_connected(timeout=60)
        assert state["status"] == "connected"
        assert worker.problems() == []
