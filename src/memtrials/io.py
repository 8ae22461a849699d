"""The one atomic file writer: every output goes to a temporary name in its own folder
and is moved into place with ``os.replace``, so a killed job never leaves a half file.

A low-level module: it imports nothing from ``memtrials``, so every layer (envs, llm,
report, studies) can use it without pulling in another.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
import threading
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "atomic_write_bytes", "atomic_write_json", "atomic_write_text", "canonical_json",
    "release_arrow_memory", "save_figure", "write_parquet", "write_parquet_groups",
]

PathLike = str | os.PathLike[str]


@contextmanager
def temporary_beside(path: PathLike, suffix: str = ".tmp") -> Iterator[tuple[Path, Path]]:
    """Yield ``(final, tmp)``: a fresh temporary path in the final path's folder.

    On a clean exit the temporary file is moved onto the final path; on any exception
    (KeyboardInterrupt included) it is removed and the exception propagates.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=suffix, dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield final, tmp
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path."""
    with temporary_beside(path) as (final, tmp):
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    return final


def atomic_write_text(path: PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def canonical_json(obj: Any, indent: int | None = 1, *, compact: bool = True, newline: bool = True,
                   default: Callable[[Any], Any] | None = None) -> str:
    """The one canonical JSON: sorted keys, UTF-8 kept as is: equal data, equal bytes.

    ``indent``: pretty, that many spaces a level; ``None``: one line, ``compact`` (``,``
    and ``:``) or with Python's spaced separators (``, `` and ``: ``).  ``newline``: end
    with one (files) or not (digest inputs: the model cache's key is
    ``canonical_json(obj, indent=None, newline=False)``).  ``default``: how to write what
    JSON has no type for (``str``: the luck study's freeze digests); None: such data raises.
    """
    separators = (",", ": ") if indent is not None else (",", ":") if compact else (", ", ": ")
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=indent, separators=separators,
                      default=default) + ("\n" if newline else "")


def atomic_write_json(path: PathLike, obj: Any, indent: int | None = 1) -> Path:
    """Write ``obj`` as canonical JSON (:func:`canonical_json`) to ``path`` atomically."""
    return atomic_write_text(path, canonical_json(obj, indent=indent))


class SpillFile:
    """Python values kept on disk while a job runs, not in memory: each :meth:`put` appends the
    value, pickled (every value round-trips exactly) and zlib-compressed, to an unnamed temporary
    file in ``folder`` and returns its place, which :meth:`get` reads back.  Thread-safe; the file
    is gone when it is closed (or the process ends).  The call recorder (:mod:`memtrials.llm.records`)
    and a cell's finished episodes' steps (:mod:`memtrials.agent.spill`) wait here."""

    def __init__(self, folder: PathLike | None = None, prefix: str = ".spill.") -> None:
        if folder is not None:
            Path(folder).mkdir(parents=True, exist_ok=True)
        self._file = tempfile.TemporaryFile(prefix=prefix, suffix=".spill", dir=folder)
        self._end = 0
        self._lock = threading.Lock()

    def put(self, value: Any) -> tuple[int, int]:
        """Append ``value``; its ``(offset, length)`` in the file."""
        blob = zlib.compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), 1)
        with self._lock:
            at = self._end
            self._file.seek(at)
            self._file.write(blob)
            self._end += len(blob)
        return at, len(blob)

    def get(self, place: tuple[int, int]) -> Any:
        """The value :meth:`put` stored at ``place``."""
        at, size = place
        with self._lock:
            self._file.flush()
            return pickle.loads(zlib.decompress(os.pread(self._file.fileno(), size, at)))

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        self._file.close()


def release_arrow_memory() -> None:
    """Hand the memory Arrow's allocator holds freed back to the system (issue 39, "Paper scale").

    Arrow's default pool (mimalloc in the wheels) keeps what a table or a Parquet writer freed for
    later allocations; between the chunks of a table written a chunk at a time, each chunk's
    conversion and encoding buffers then leave freed pages behind, and a job's resident memory grows
    with the chunks it writes (docs/measurements.md).  Called after each chunk and after each
    write, it bounds the retained memory to one chunk's; the values written are untouched."""
    pa.default_memory_pool().release_unused()


def write_parquet(table_or_dataframe: Any, path: PathLike, schema: pa.Schema | None = None) -> Path:
    """Write a pyarrow Table or pandas DataFrame as zstd Parquet, atomically.

    A DataFrame is converted with ``schema`` (if given) and without its index; a Table
    given with a ``schema`` is cast to it (a column mismatch raises).
    """
    if isinstance(table_or_dataframe, pa.Table):
        table = table_or_dataframe
        if schema is not None and not table.schema.equals(schema):
            table = table.cast(schema)
    else:
        table = pa.Table.from_pandas(table_or_dataframe, schema=schema, preserve_index=False)
    with temporary_beside(path, suffix=".parquet.tmp") as (final, tmp):
        pq.write_table(table, tmp, compression="zstd")
    release_arrow_memory()  # the writer's encoding buffers, freed: not kept by the allocator
    return final


def write_parquet_groups(tables: Iterable[pa.Table], schema: pa.Schema, path: PathLike,
                         rows: int | None = None) -> Path:
    """Write ``tables`` (consumed as they come) as zstd Parquet of ``schema``, atomically, a row group
    a table, handing Arrow's freed memory back after each (:func:`release_arrow_memory`): what a
    writer holds is one table's, not the whole file's (issue 39, "Paper scale").  ``rows``: how many
    rows the tables hold in all; another count raises before the file takes its name."""
    written = 0
    with temporary_beside(path, suffix=".parquet.tmp") as (final, tmp):
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for table in tables:
                writer.write_table(table)
                written += table.num_rows
                release_arrow_memory()
        if rows is not None and written != rows:
            raise ValueError(f"{path}: {written} rows written, {rows} announced")
    return final


SVG_SALT = "hindsight"
"""The constant that salts a figure's SVG ids: a seed, not a name. It keeps the project's former
name so that every SVG the pipeline draws stays byte-identical to those drawn before the rename."""


def save_figure(fig: Any, paths: Iterable[PathLike], dpi: int = 150) -> list[Path]:
    """Save a matplotlib figure to each path (format from the suffix), atomically.

    Software and date stamps are left out and SVG ids are salted with a constant, so
    identical figures give identical files.
    """
    import matplotlib

    out = []
    for path in paths:
        fmt = Path(path).suffix.lstrip(".")
        meta = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt)
        with temporary_beside(path, suffix=Path(path).suffix) as (final, tmp):
            with matplotlib.rc_context({"svg.hashsalt": SVG_SALT}):
                fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=fmt, metadata=meta)
        out.append(final)
    return out
