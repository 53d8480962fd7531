"""Render docs/PORTING.md from docs/PORTING.md.in: each {{path:text}} becomes a link to the
first line of `path` that starts with `text` (or, failing that, contains it), so the links
follow the code as it moves.

    python tools/porting_links.py            # rewrite docs/PORTING.md
    python tools/porting_links.py --check    # exit 1 if docs/PORTING.md is out of date
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE, OUTPUT = ROOT / "docs" / "PORTING.md.in", ROOT / "docs" / "PORTING.md"
PLACEHOLDER = re.compile(r"\{\{([^:}]+):([^}]+)\}\}")


def line_of(path: str, text: str) -> int:
    lines = (ROOT / path).read_text().splitlines()
    for matches in (lambda line: line.startswith(text), lambda line: text.strip() in line):
        hits = [number for number, line in enumerate(lines, 1) if matches(line)]
        if hits:
            return hits[0]
    raise SystemExit(f"{TEMPLATE.name}: '{text}' not found in {path}; update the template.")


def render() -> str:
    def link(match: re.Match) -> str:
        path, text = match.group(1), match.group(2)
        number = line_of(path, text)
        return f"[{path}:{number}](../{path}#L{number})"

    return PLACEHOLDER.sub(link, TEMPLATE.read_text())


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT} is out of date: run python tools/porting_links.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
