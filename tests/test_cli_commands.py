"""The lazily imported command table stays in step with the command modules."""

from __future__ import annotations

import importlib
import subprocess
import sys

from backtrail import cli


def test_every_command_module_registers_exactly_the_commands_the_table_names() -> None:
    modules = set(cli.COMMAND_MODULES.values())
    for module_name in modules:
        defined = {c.name for c in importlib.import_module(module_name).COMMANDS}
        named = {name for name, m in cli.COMMAND_MODULES.items() if m == module_name}
        assert defined == named, module_name


def test_starting_the_mcp_command_does_not_import_the_data_commands() -> None:
    code = (
        "import sys; from backtrail import cli; cli.cli.get_command(None, 'mcp'); "
        "print(sorted(m for m in sys.modules if m.startswith('backtrail.cli')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "backtrail.cli.search" not in out.stdout and "backtrail.cli.mcp" in out.stdout
