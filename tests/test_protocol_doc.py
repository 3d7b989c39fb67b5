"""native-host/PROTOCOL.md says what the host does: the capture outcomes of section 3.2
are those a real host answers, and the error table of section 6 is the host's codes."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from backtrail.native_host.codes import RETRYABLE, Code
from backtrail.store.models import CaptureOutcome
from host_client import HostProcess, capture_fields

PROTOCOL = (Path(__file__).resolve().parent.parent / "native-host" / "PROTOCOL.md").read_text(
    encoding="utf-8"
)


def section(heading: str) -> str:
    start = PROTOCOL.index(f"\n{heading}")
    following = re.search(r"\n#{2,3} ", PROTOCOL[start + 1 :])
    return PROTOCOL[start : start + 1 + following.start()] if following else PROTOCOL[start:]


def documented_outcomes() -> list[str]:
    """The first column of the table headed ``| outcome | when |`` in section 3.2."""
    text = section("### 3.2 `capture_page`")
    table = text[text.index("| outcome | when |") :].split("\n\n")[0]
    return re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)


def test_the_documented_capture_outcomes_are_those_a_real_host_answers(data_home: Path) -> None:
    url = "https://example.com/article"
    text = "Write-ahead logging keeps the database consistent after a crash. " * 8
    other = "Bread needs flour, water, salt and a starter kept warm overnight. " * 8
    sent = [  # (content, title, html): each outcome in turn
        (text, "A page", False),  # the first version
        (text, "A page", False),  # the same again
        (text, "A page, retitled", False),  # only the title changed
        (other, "A page, retitled", False),  # other text
        (f"<html><body><article><p>{other} More.</p></article></body></html>", None, True),
    ]
    answered = []
    with HostProcess(data_home) as host:
        host.hello()
        for n, (body, title, html) in enumerate(sent):
            fields = capture_fields(url, body, visit_id=f"v-{n}", html=html, title=title)
            answer = host.call("capture_page", **fields)
            assert answer["ok"] is True, answer
            answered.append(answer["result"]["outcome"])
    assert answered == ["created", "unchanged", "updated", "new_version", "queued"]
    assert sorted(documented_outcomes()) == sorted(answered)
    # Every outcome the code can give is documented.
    assert {*typing.get_args(CaptureOutcome), "queued"} == set(documented_outcomes())


def test_the_error_table_is_the_hosts_codes_with_their_retry_policy() -> None:
    rows = re.findall(r"^\| (\d+) \| `([a-z0-9_]+)` \| ([^|]+) \|", section("## 6."), re.MULTILINE)
    assert [(int(code), name) for code, name, _ in rows] == [(c.value, c.wire_name) for c in Code]
    retried = {Code(int(code)) for code, _, retry in rows if retry.strip().startswith("**yes")}
    assert retried == RETRYABLE
    assert [int(code) for code, _, _ in rows] == list(range(1, len(rows) + 1))  # append only
