"""Names are shown escaped where a terminal or a browser would act on them (lakecore/core/display.py).

The trial: a table name with U+202E (the right-to-left override) showed reversed in
``table list`` and in every summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakecore.cli import main as cli_main
from lakecore.core import keys
from lakecore.core.display import escape_for_display
from lakecore.lakehouse import Lakehouse
from lakecore.lakehouse.report.html import esc

REVERSED = "invoices\u202etxt.exe"


@pytest.mark.parametrize(
    ("shown", "text"),
    [
        ("invoices\\u202etxt.exe", REVERSED),
        ("a\\u200bb", "a\u200bb"),  # zero width space: two names that look alike
        ("x\\u001b[31m", "x\x1b[31m"),
        ("bad\\udcffbyte", "bad\udcffbyte"),  # a path that is not UTF-8
        ("one\\u2028two", "one\u2028two"),  # a line separator
        ("tag\\U000e0041", "tag\U000e0041"),  # a tag character, above the BMP
    ],
)
def test_what_a_terminal_would_act_on_is_escaped(shown: str, text: str) -> None:
    assert escape_for_display(text) == shown


def test_ordinary_text_is_left_alone() -> None:
    text = "ventes été 2026 日本語 😀\n\tindented"
    assert escape_for_display(text) == text


def test_table_list_and_history_show_the_override_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = str(tmp_path / "lake")
    lh = Lakehouse.create(lake, name="names", order=8)
    # lakecore refuses such a new name, but the format allows it: another writer (or an older
    # lakecore) may have stored it, and every reader must still show it safely.
    monkeypatch.setattr(keys, "refuse_unclear_name", lambda name, what="object": None)
    with lh.transaction() as tx:
        tx.create_namespace("ns")
        tx.create_table("ns", REVERSED)
    monkeypatch.undo()
    capsys.readouterr()
    for command in (["table", "list", "ns"], ["history"], ["diff", "0", "1"]):
        assert cli_main(["-l", lake, *command]) == 0
        out = capsys.readouterr().out
        assert "\u202e" not in out and "invoices\\u202etxt.exe" in out, command
    # JSON keeps the name exactly (with JSON's own escape).
    assert cli_main(["-l", lake, "--json", "table", "list", "ns"]) == 0
    out = capsys.readouterr().out
    assert "\u202e" not in out and REVERSED in json.dumps(json.loads(out), ensure_ascii=False)
    # An error that names it escapes it too.
    assert cli_main(["-l", lake, "table", "show", "ns", "no" + REVERSED]) != 0
    assert "\u202e" not in capsys.readouterr().err


def test_pages_escape_it_too() -> None:
    assert esc(REVERSED) == "invoices\\u202etxt.exe"
    assert esc("<b>") == "&lt;b&gt;"
