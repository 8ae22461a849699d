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
from typing import Any, Iterator, Mapping, Sequence

from memtrials.io import SpillFile


class StepSpill:
    """One cell's spill file (:class:`memtrials.io.SpillFile`); use as a context manager (the file
    is gone when it closes)."""

    def __init__(self, folder: str | os.PathLike[str] | None = None) -> None:
        self._file = SpillFile(folder, prefix=".steps.")

    def put(self, rows: Sequence[Mapping[str, Any]]) -> SpilledSteps:
        """Move ``rows`` to the file; the returned sequence reads them back."""
        return SpilledSteps(self._file, self._file.put([dict(r) for r in rows]), len(rows))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> StepSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SpilledSteps(Sequence[dict[str, Any]]):
    """An episode's step rows in a :class:`StepSpill`, read back (whole) on each use."""

    def __init__(self, file: SpillFile, place: tuple[int, int], n: int) -> None:
        self._file, self._place, self._n = file, place, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        return self._file.get(self._place)[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._file.get(self._place))
