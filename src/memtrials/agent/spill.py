"""Finished episodes' step rows kept on disk while a cell runs (issue 39, "Paper scale").

A paper-scale cell plays hundreds of episodes of tens of steps, each step row carrying its
observations and the listing of every admissible action; held until the cell writes its step
table they make a job's memory grow with its episodes.  With a :class:`StepSpill` the runner
(:meth:`memtrials.agent.runner.Runner.concurrent`) moves each finished episode's rows, pickled
and compressed, to an unnamed temporary file and leaves a :class:`SpilledSteps` in their place,
read back when the step table is written (:func:`memtrials.agent.runner.write_episodes`, a
chunk of rows at a time).  The rows read back are the rows put, value for value.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import threading
import zlib
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence


class StepSpill:
    """One cell's spill file; use as a context manager (the file is gone when it closes)."""

    def __init__(self, folder: str | os.PathLike[str] | None = None) -> None:
        if folder is not None:
            Path(folder).mkdir(parents=True, exist_ok=True)
        self._file = tempfile.TemporaryFile(prefix=".steps.", suffix=".spill", dir=folder)
        self._end = 0
        self._lock = threading.Lock()

    def put(self, rows: Sequence[Mapping[str, Any]]) -> SpilledSteps:
        """Move ``rows`` to the file; the returned sequence reads them back."""
        blob = zlib.compress(pickle.dumps([dict(r) for r in rows], protocol=pickle.HIGHEST_PROTOCOL), 1)
        with self._lock:
            at = self._end
            self._file.seek(at)
            self._file.write(blob)
            self._end += len(blob)
        return SpilledSteps(self, at, len(blob), len(rows))

    def read(self, at: int, size: int) -> list[dict[str, Any]]:
        with self._lock:
            self._file.flush()
            return pickle.loads(zlib.decompress(os.pread(self._file.fileno(), size, at)))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> StepSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SpilledSteps(Sequence[dict[str, Any]]):
    """An episode's step rows in a :class:`StepSpill`, read back (whole) on each use."""

    def __init__(self, spill: StepSpill, at: int, size: int, n: int) -> None:
        self._spill, self._at, self._size, self._n = spill, at, size, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        return self._spill.read(self._at, self._size)[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._spill.read(self._at, self._size))
