"""The docs point at code and pages that exist: each PORTING.md link names a file and a symbol
in it, and every relative link of README.md and docs/ a file and, with an #anchor, a heading of
that file.

Links name a symbol, not a line number, so code that moves within its file keeps its links;
code that is renamed or removed, or a section that moves, fails here."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_BLOCK = re.compile(r"^```.*?^```", re.S | re.M)
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


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to '-'."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", CODE_BLOCK.sub("", text), re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return anchors


def test_anchors_follow_githubs_rules():
    text = "# Speed (CPU)\n## What TensorBoard costs an iteration\n### The GPU check: `tools/gpu_check.sh`\n"
    assert heading_anchors(text) == {"speed-cpu", "what-tensorboard-costs-an-iteration",
                                     "the-gpu-check-toolsgpu_checksh"}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_reaches_its_file_and_heading(page):
    text = CODE_BLOCK.sub("", page.read_text())
    broken = []
    for target in MARKDOWN_LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT)}")
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked.read_text()):
            broken.append(f"{target}: no heading '#{anchor}' in {linked.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
