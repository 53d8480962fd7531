"""Which existing files a command may replace: its own earlier outputs, never anything else.

Every file or folder this project writes where a user keeps data carries a mark of its
writer, so a later run can tell its own output from a user's file of the same name:

- JSON files a key (``WRITTEN_BY_KEY``: the converter's ``transforms.json``), or a file
  written first that marks the folder (the demo scene's ``demo_scene.json``, the undistorted
  images' ``undistort.json``, a render folder's ``RENDERS_MARK``);
- PLY files a header line (``PLY_COMMENT``: meshes, sparse points, previews);
- PNG images a text chunk (``PNG_KEY``: previews).

``refuse_foreign_file`` and ``claim_folder`` raise ``OutputConflict`` (exit status 2) before a
byte is written when a path holds something without its mark. Nothing here writes.
"""
from __future__ import annotations

import json
import os
from typing import Callable

from tensorf_jt.errors import OutputConflict

WRITER = "tensorf_jt"
WRITTEN_BY_KEY = "written_by"
PLY_COMMENT = "comment written by tensorf_jt"
PNG_KEY = "Software"  # the PNG text keyword for the program that wrote the file
RENDERS_MARK = ".tensorf_jt_renders"  # written first into a render folder next to a PyTorch TensoRF checkpoint
_PLY_HEADER_LIMIT = 1 << 16  # a header longer than this is not one this project wrote
_JSON_LIMIT = 1 << 26  # transforms files of ours stay far below 64 MB (about 1 kB a frame)
_LISTED = 5  # entries named in a refusal


def listed(names: list[str], more: bool = False) -> str:
    """Up to five names quoted, and 'and more' when there were others."""
    text = ", ".join(f"'{name}'" for name in names[:_LISTED])
    return text + (" and more" if more or len(names) > _LISTED else "")


def files_in(folder: str, limit: int | None = None) -> list[str]:
    """Paths of the files under ``folder`` relative to it ('/'-separated, sorted per folder),
    at most ``limit`` of them (None: all); empty folders count for nothing."""
    found: list[str] = []
    for parent, subfolders, names in os.walk(folder):
        subfolders.sort()
        for name in sorted(names):
            found.append(os.path.relpath(os.path.join(parent, name), folder).replace(os.sep, "/"))
            if limit is not None and len(found) >= limit:
                return found
    return found


def read_json_object(path: str) -> dict | None:
    """The JSON object in ``path``, or None when the file is missing, too large for ours,
    unreadable or not a JSON object."""
    try:
        if os.path.getsize(path) > _JSON_LIMIT:
            return None
        with open(path, "r", encoding="utf-8") as handle:
            content = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return content if isinstance(content, dict) else None


def json_written_by(path: str, writer: str) -> bool:
    """Whether ``path`` is a JSON object whose ``WRITTEN_BY_KEY`` names ``writer``."""
    content = read_json_object(path)
    return content is not None and content.get(WRITTEN_BY_KEY) == writer


def ply_is_ours(path: str) -> bool:
    """Whether the PLY header of ``path`` carries ``PLY_COMMENT``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_PLY_HEADER_LIMIT)
    except OSError:
        return False
    end = head.find(b"end_header")
    if not head.startswith(b"ply") or end < 0:
        return False
    return PLY_COMMENT.encode("ascii") in [line.strip() for line in head[:end].split(b"\n")]


def png_is_ours(path: str) -> bool:
    """Whether ``path`` is a PNG image whose ``PNG_KEY`` text chunk names this project."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            if image.format != "PNG":
                return False
            image.load()
            return str(image.info.get(PNG_KEY, "")).startswith(WRITER)
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError):
        return False


def png_mark() -> dict[str, str]:
    """The PNG text chunk that ``png_is_ours`` recognises (matplotlib's ``savefig(metadata=...)``)."""
    return {PNG_KEY: WRITER}


def refuse_foreign_file(path: str, is_ours: Callable[[str], bool], remedy: str) -> None:
    """Raise ``OutputConflict`` when ``path`` exists and ``is_ours`` does not recognise it.

    ``remedy`` completes the message: what the user can do (another output path, a flag).
    """
    if not os.path.lexists(path):
        return
    if os.path.isdir(path) or not is_ours(path):
        what = "a folder" if os.path.isdir(path) else "a file"
        raise OutputConflict(f"'{path}' is {what} tensorf_jt did not write; refusing to replace it. {remedy}")


def claim_folder(folder: str, is_ours: Callable[[str], bool], what: str, remedy: str) -> None:
    """Raise ``OutputConflict`` unless ``folder`` may receive ``what``: it does not exist, holds
    no file (empty folders do not count), or ``is_ours(folder)`` recognises its mark.

    The message names the folder, the first files found in it and ``remedy``.
    """
    if not os.path.lexists(folder):
        return
    if not os.path.isdir(folder):
        raise OutputConflict(f"'{folder}' is a file, not a folder for {what}. {remedy}")
    if is_ours(folder):
        return
    present = files_in(folder, limit=_LISTED + 1)
    if present:
        raise OutputConflict(f"'{folder}' holds files tensorf_jt did not write ({listed(present)}); refusing to "
                             f"write {what} into it. {remedy}")


def unused_path(path: str) -> str:
    """``path``, or where a file is there already, the first of ``stem-2.ext``, ``stem-3.ext``, ...
    that is free: for outputs named by the time, which must never replace one another."""
    stem, extension = os.path.splitext(path)
    candidate, number = path, 1
    while os.path.lexists(candidate):
        number += 1
        candidate = f"{stem}-{number}{extension}"
    return candidate


def same_file(first: str, second: str) -> bool:
    """Whether two paths name one file (also through links); False when either is missing."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return os.path.abspath(first) == os.path.abspath(second)
