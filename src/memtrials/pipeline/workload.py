"""What a run will ask of its endpoints, counted from the design before any call (:class:`Work`).

Each study's :meth:`memtrials.pipeline.study.Study.workload` lists its rows: per part and
endpoint, the jobs and episodes its design makes, and per purpose of a model call (the
``purpose`` of the call's record: ``actor``, ``review``, ``judge``, ...) the *units* the
design fixes and the step cap over which they repeat.  What the design alone cannot tell
(how many of the capped steps an episode really takes, how many calls a memory update
makes, how long each prompt is and how it grows step by step) comes from a measured
table of per-call figures (:class:`Profile`, :mod:`memtrials.pipeline.estimate`).
This module names no study.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


ANY = "*"
"""The purpose of a :class:`Work` row that stands for every measured purpose of its part not named otherwise."""


@dataclass(frozen=True)
class Work:
    """One row of a study's workload.

    ``part``: the study's part (the second path segment of its cells' ids, e.g. ``rollouts``);
    ``endpoint``: the registry name that answers; ``purpose``: the records' ``purpose`` of the
    calls counted here (``""``: a row of jobs and episodes only); ``units``: how many times
    the design makes the call (per-step purposes: episodes); ``steps``: the step cap each unit
    repeats over (1: once); ``jobs`` / ``episodes``: the rule jobs and episodes the row adds.
    Calls at the cap are ``units x steps``; the measured ``calls_per_unit`` scales them.

    Purpose :data:`ANY`: every purpose the measured table holds under the part that no other
    row of the part names (a memory's update and retrieval calls, which differ by memory),
    ``units`` times each; chat purposes go to ``endpoint``, embedding ones to ``embedder``.
    ``profile``: ``<study>/<part>`` whose measured figures the row reads, where another
    study's cells make the calls (default: this study and ``part``); ``cell``: the id of the
    cell whose records the row counts (optional: lets a table be measured from the finished
    cells of an unfinished run)."""

    part: str
    endpoint: str
    purpose: str = ""
    units: int = 0
    steps: int = 1
    jobs: int = 0
    episodes: int = 0
    in_flight: int = 1
    embedder: str = ""
    profile: str = ""
    cell: str = ""

    def capped_calls(self) -> int:
        return int(self.units) * max(1, int(self.steps))


@dataclass(frozen=True)
class Profile:
    """Measured per-call figures of one ``<study>/<part>/<purpose>``.

    ``calls_per_unit``: recorded calls over the design's calls at the cap (below 1 where
    episodes end before their cap; above where a memory update makes several calls);
    ``prompt_base`` + ``prompt_per_step`` x (step - 1): prompt tokens of a call at a step of its
    episode (a least-squares line over the measured calls, steps found by prefix chains);
    ``completion``: mean completion tokens; ``prefix_share``: share of the prompt tokens that
    repeat an earlier call's prefix in the same cell (what a provider's prefix cache could
    serve); ``latency_s``: mean seconds per call on the measured endpoint; ``calls``: how many
    calls were measured; ``mean_step``: their mean step (for reading the table); ``task``:
    ``embed`` where an embedding endpoint answered them.  ``source``: ``measured`` (derived
    from a run's records) or ``design`` (a study's :meth:`~memtrials.pipeline.study.Study.design_figures`
    for a purpose no run has measured: its call count, prompt and output from the design's
    caps, templates and the measured figures of a like purpose), which ``basis`` describes."""

    calls_per_unit: float
    prompt_base: float
    prompt_per_step: float
    completion: float
    prefix_share: float
    latency_s: float
    calls: int
    mean_step: float = 1.0
    task: str = "chat"
    source: str = "measured"
    basis: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()
                if not (k == "basis" and not v)}

    @classmethod
    def from_mapping(cls, key: str, data: Mapping[str, Any], source: str) -> "Profile":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        missing = sorted(k for k in known - set(data) if k not in ("mean_step", "task", "source", "basis"))
        if unknown or missing:
            raise ValueError(f"{source}: profile {key}: unknown keys {unknown}, missing keys {missing}; "
                             f"expected {', '.join(sorted(known))} (rewrite it with python -m memtrials estimate "
                             "--derive)")
        if data.get("source", "measured") not in ("measured", "design"):
            raise ValueError(f"{source}: profile {key}: source {data['source']!r}; expected measured or design")
        return cls(**{k: (int(v) if k == "calls" else str(v) if k in ("task", "source", "basis") else float(v))
                      for k, v in data.items()})


OFFICIAL_SPLIT_SIZES: dict[str, dict[str, int]] = {
    "alfworld": {"train": 3553, "eval_in_distribution": 140, "eval_out_of_distribution": 134},
    "appworld": {"train": 90, "dev": 57, "test_normal": 168, "test_challenge": 417},
}
"""Tasks per split of the official data sets (ALFWorld 2.1.1's json_2.1.1 games; AppWorld's
released splits), for an estimate made before their task tables are built."""


def tasks_of(env: str, split: str | None, n: int | None, envs_cfg: Mapping[str, Any]) -> int:
    """``n`` tasks, or (``None``: the whole split) the split's size: the configured or built
    data's (:func:`memtrials.envs.catalog.split_size`), else the official data's published
    size, else 0 (unknown before its task table is built)."""
    if n is not None:
        return int(n)
    from memtrials.envs.catalog import split_size

    known = split_size(env, split, envs_cfg)
    if known is not None:
        return int(known[0])
    return int(OFFICIAL_SPLIT_SIZES.get(env, {}).get(str(split), 0))


@dataclass
class Tally:
    """Sums of one (study, endpoint) or one endpoint: what :func:`memtrials.pipeline.estimate.estimate` prints
    (``design_tokens``: the input and output tokens counted with figures from the design; ``designed``:
    their purposes; ``unmeasured``: purposes without figures)."""

    jobs: int = 0
    episodes: int = 0
    calls: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    cacheable_tokens: float = 0.0
    call_seconds: float = 0.0
    parallel: int = 0
    design_tokens: float = 0.0
    unmeasured: set[str] = field(default_factory=set)
    designed: set[str] = field(default_factory=set)

    def add(self, other: "Tally") -> None:
        for k in ("jobs", "episodes", "calls", "input_tokens", "output_tokens", "cacheable_tokens", "call_seconds",
                  "parallel", "design_tokens"):  # parallel: the episodes the jobs could keep in flight at once
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.unmeasured |= other.unmeasured
        self.designed |= other.designed
