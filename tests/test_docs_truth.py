"""Documents and UI text say what the code does: every ``backtrail`` command the README
shows exists with the options it uses, and the options page names the browser actions
and assistant tools that really exist."""

from __future__ import annotations

import re
import shlex
from html.parser import HTMLParser
from pathlib import Path

import click
import pytest
from mcp import Client

from backtrail.cli import cli
from mcp_support import stdio_params

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
OPTIONS_PAGE = (ROOT / "extension" / "src" / "ui" / "options.html").read_text(encoding="utf-8")
PROTOCOL = (ROOT / "native-host" / "PROTOCOL.md").read_text(encoding="utf-8")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def readme_commands() -> list[str]:
    """Every ``backtrail ...`` command line of the README: code blocks and inline code."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.DOTALL):
        found += [line.split(" #")[0].strip() for line in block.splitlines()]
    inline = re.findall(r"`((?:sudo )?backtrail [^`]+)`", README)
    found += [" ".join(code.split()) for code in inline]
    commands = []
    for line in found:
        words = line.split()
        while words and (words[0] == "sudo" or re.match(r"^[A-Z_]+=", words[0])):
            words = words[1:]
        if words[:1] == ["backtrail"]:
            commands.append(" ".join(words))
    return sorted(set(commands))


def resolve(words: list[str]) -> tuple[click.Command, list[str]]:
    """The command the words name, and the words left (its options and arguments)."""
    command: click.Command = cli
    ctx = click.Context(cli)
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        found = command.get_command(ctx, words[0])
        if found is None:
            raise AssertionError(f"no command {words[0]!r} under {command.name!r}")
        command, words = found, words[1:]
    return command, words


def test_every_command_the_readme_shows_exists_with_its_options() -> None:
    commands = readme_commands()
    assert "backtrail config exclusions add example.com" in commands
    assert "backtrail uninstall --claude --cursor" in commands
    problems = []
    for line in commands:
        try:
            command, rest = resolve(shlex.split(line)[1:])
        except AssertionError as error:
            problems.append(f"{line}: {error}")
            continue
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        known |= {"-h", "--help"}
        used = [w.split("=")[0] for w in rest if w.startswith("-")]
        problems += [f"{line}: {command.name} has no {o}" for o in used if o not in known]
    assert problems == []


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.actions: list[str] = []
        self.code: list[str] = []
        self._in_code = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("data-action"):
            self.actions.append(str(values["data-action"]))
        self._in_code = tag == "code"

    def handle_data(self, data: str) -> None:
        if self._in_code:
            self.code.append(data)
        self._in_code = False


async def test_the_options_page_names_the_actions_and_tools_that_exist(tmp_path: Path) -> None:
    page = _Text()
    page.feed(OPTIONS_PAGE)
    assert "Reserved" not in OPTIONS_PAGE
    # The switches are the actions of PROTOCOL.md section 5.
    section = PROTOCOL[PROTOCOL.index("## 5. Push messages") : PROTOCOL.index("## 6.")]
    assert sorted(page.actions) == sorted(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))
    async with Client(stdio_params(tmp_path), mode="legacy") as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
    named = [code for code in page.code if re.fullmatch(r"[a-z_]+", code)]
    assert len(named) == 3 and set(named) <= tools
    commands = [code for code in page.code if code.startswith("backtrail ")]
    assert commands == ["backtrail config exclusions", "backtrail events --type action"]
    for line in commands:
        command, rest = resolve(shlex.split(line)[1:])
        known = {o for p in command.params for o in p.opts}
        assert all(word in known for word in rest if word.startswith("-")), line
