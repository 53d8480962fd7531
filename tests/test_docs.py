"""The docs point at code that exists: each PORTING.md link names a file and a symbol in it.

Links name a symbol, not a line number, so code that moves within its file keeps its links;
code that is renamed or removed fails here."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# [path `symbol`](../path)
PORTING_LINK = re.compile(r"\[([\w./-]+) `([^`]+)`\]\(\.\./([\w./-]+)\)")


def broken_links(text: str) -> list[str]:
    """Each link of ``text`` whose file is missing, or does not hold its symbol, as a message."""
    broken = []
    for path, symbol, target in PORTING_LINK.findall(text):
        file = ROOT / path
        if path != target or not file.is_file():
            broken.append(f"{path} (link target {target}) does not exist")
        elif not any(line.strip().startswith(symbol) or symbol in line for line in file.read_text().splitlines()):
            broken.append(f"{path} has no '{symbol}'")
    return broken


def test_porting_notes_name_code_that_exists():
    text = (ROOT / "docs" / "PORTING.md").read_text()
    assert len(PORTING_LINK.findall(text)) >= 40, "the porting notes should link their rules to the code"
    assert broken_links(text) == []


def test_a_renamed_symbol_or_file_is_reported():
    assert broken_links("[tensorf_jt/kernels/__init__.py `def check_kernels`](../tensorf_jt/kernels/__init__.py)") == []
    assert broken_links("[tensorf_jt/kernels/__init__.py `def set_kernels`](../tensorf_jt/kernels/__init__.py)") == [
        "tensorf_jt/kernels/__init__.py has no 'def set_kernels'"]
    assert broken_links("[tensorf_jt/gone.py `x`](../tensorf_jt/gone.py)") == [
        "tensorf_jt/gone.py (link target tensorf_jt/gone.py) does not exist"]
