"""WebShop's shipped data: locate ``data/webshop/``, verify it, read it.

The folder holds single-stream xz files and ``SHA256SUMS`` with the SHA-256 of each
**uncompressed** file (see ``data/webshop/NOTICE.md`` for licence and provenance).  Every
reader here decompresses with the standard :mod:`lzma`, checks the digest before parsing,
and raises :class:`WebShopDataError` naming the file and the fix when a file is missing,
truncated or altered.  Callers cache what they parse (:func:`memtrials.envs.webshop.catalog.load_catalog`
once per process), so nothing here keeps the bytes.
"""

from __future__ import annotations

import hashlib
import json
import lzma
from pathlib import Path
from typing import Any, Iterator

from memtrials.config import REPO_ROOT

#: The files the environment reads (uncompressed names), all listed in ``SHA256SUMS``.
CATALOG_FILE = "items_shuffle_1000.json"
ATTRIBUTES_FILE = "items_ins_v2_1000.json"
HUMAN_INSTRUCTIONS_FILE = "items_human_ins.subset_1000.json"
DOC_TOKENS_FILE = "doc_tokens.jsonl"
REQUIRED = (CATALOG_FILE, ATTRIBUTES_FILE, HUMAN_INSTRUCTIONS_FILE, DOC_TOKENS_FILE)
SUMS_FILE = "SHA256SUMS"

_FIX = ("Fix: restore it from a clean checkout (`git checkout -- data/webshop/`), or point `root` at a folder "
        "holding the shipped files unchanged (see data/webshop/NOTICE.md).")


class WebShopDataError(RuntimeError):
    """A shipped WebShop data file is missing, unreadable or fails its SHA-256 check."""


def data_root(root: str | Path | None = None) -> Path:
    """The data folder: ``root`` if given, else the checkout's ``data/webshop/``."""
    folder = Path(root) if root is not None else REPO_ROOT / "data" / "webshop"
    if not folder.is_dir():
        raise WebShopDataError(f"{folder}: the WebShop data folder does not exist. {_FIX}")
    return folder.resolve()


def expected_digests(root: str | Path | None = None) -> dict[str, str]:
    """``SHA256SUMS`` of the folder as ``{uncompressed name: hex digest}``; every required file listed."""
    folder = data_root(root)
    sums = folder / SUMS_FILE
    try:
        lines = sums.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise WebShopDataError(f"{sums}: cannot read the digest list ({exc}). {_FIX}") from None
    digests: dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or len(parts[0]) != 64 or any(c not in "0123456789abcdef" for c in parts[0]):
            raise WebShopDataError(f"{sums}, line {n}: expected '<sha256 hex>  <file name>', got {line!r}. {_FIX}")
        digests[parts[1].lstrip("*")] = parts[0]
    missing = [name for name in REQUIRED if name not in digests]
    if missing:
        raise WebShopDataError(f"{sums}: no digest for {', '.join(missing)}. {_FIX}")
    return digests


def read_bytes(name: str, root: str | Path | None = None) -> bytes:
    """The uncompressed, verified content of ``<name>.xz`` in the data folder."""
    folder = data_root(root)
    path = folder / f"{name}.xz"
    want = expected_digests(folder).get(name)
    if want is None:
        raise WebShopDataError(f"{folder / SUMS_FILE}: no digest for {name}. {_FIX}")
    if not path.is_file():
        raise WebShopDataError(f"{path}: missing WebShop data file. {_FIX}")
    try:
        with lzma.open(path, "rb") as fh:
            raw = fh.read()
    except (OSError, lzma.LZMAError, EOFError) as exc:
        raise WebShopDataError(f"{path}: not a readable xz file ({exc}); the file is corrupt. {_FIX}") from None
    got = hashlib.sha256(raw).hexdigest()
    if got != want:
        raise WebShopDataError(
            f"{path}: SHA-256 of the uncompressed content is {got}, {folder / SUMS_FILE} expects {want}; "
            f"the file is corrupt or was changed. {_FIX}")
    return raw


def verify(root: str | Path | None = None) -> dict[str, str]:
    """Check every required file; return ``{name: digest}`` (what the set-up step records)."""
    digests = expected_digests(root)
    for name in REQUIRED:
        read_bytes(name, root)
    return {name: digests[name] for name in REQUIRED}


def read_json(name: str, root: str | Path | None = None) -> Any:
    """A verified JSON file of the data folder, parsed."""
    raw = read_bytes(name, root)
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise WebShopDataError(f"{data_root(root) / (name + '.xz')}: not valid JSON ({exc}). {_FIX}") from None


def read_jsonl(name: str, root: str | Path | None = None) -> Iterator[dict[str, Any]]:
    """The records of a verified JSON-lines file of the data folder."""
    raw = read_bytes(name, root)
    for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError as exc:
            raise WebShopDataError(f"{data_root(root) / (name + '.xz')}, line {n}: not valid JSON ({exc}). "
                                   f"{_FIX}") from None
