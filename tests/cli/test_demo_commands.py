"""The demo echoes each command as a shell would run it (paste it and it runs the same)."""

from __future__ import annotations

import subprocess

import pytest

from carbonstore import demo


@pytest.mark.parametrize("argv", [
    ("sql", "SELECT city, count(*) AS n FROM demo.sales GROUP BY city ORDER BY city"),
    ("query", "demo.sales", "--where", "product = 'product_042'", "--limit", "5"),
    ("create", "demo.sales", "--schema", "id long not null, amount decimal(12,2)"),
    ("load", "demo.sales", "--input", "sample_data/*.csv", "--option", "sep=;"),
])
def test_echoed_commands_give_the_shell_the_same_arguments(argv: tuple[str, ...]) -> None:
    line = demo.command_line(argv)
    words = subprocess.run(["bash", "-O", "failglob", "-c", 'printf "%s\\n" ' + line],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert words == ["carbonstore", *argv]
