"""One design name -> its memory, built from a job's config slice.

Every design is a :class:`memtrials.memory.base.Memory`: the memory designs and the mode
selector live in :mod:`memtrials.memory` and :mod:`memtrials.stats.bandit`, the baselines
in :mod:`memtrials.memory.reflexion`, :mod:`~memtrials.memory.expel` and
:mod:`~memtrials.memory.autorefine`; ReAct is :class:`.design.NoMemory`; ``memory-<name>`` is
a user's memory class named in the config's ``memory:`` section (:mod:`memtrials.memory.registry`).  The synthesizer
is the backbone itself unless ``antipersist.synthesizer`` names another endpoint; the
embedder is ``roles.embedder``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memtrials.memory.base import Memory, MemoryContext
from memtrials.memory.registry import build, memory_name
from memtrials.studies.antipersist.design import MODES, NoMemory, sweep_of


def selector_settings(design: str, selector: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The selector of an anti-persistence design (:func:`memtrials.stats.bandit.make_selector`)."""
    base = {k: selector[k] for k in ("lam", "gamma", "neighbours", "bonus", "min_cosine", "rotate_rounds", "epsilon")}
    if design in ("antipersist", "antipersist-persisted"):
        return {"policy": "bandit", **base, "seed": seed}
    if design.startswith("fixed-"):
        return {"policy": "fixed", "arm": design.removeprefix("fixed-"), "lam": base["lam"], "seed": seed}
    if design == "random":
        return {"policy": "uniform", "lam": base["lam"], "seed": seed}
    sw = sweep_of(design)
    if sw is None:
        raise ValueError(f"{design!r} is not an anti-persistence design")
    key, value = sw
    return {"policy": "bandit", **base, ("gamma" if key == "gamma" else "lam"): value, "seed": seed}


def uses_selector(design: str) -> bool:
    return design in ("antipersist", "antipersist-persisted", "random") or design.startswith("fixed-") \
        or sweep_of(design) is not None


def make_memory(design: str, cell: Mapping[str, Any], prompts_dir: str, *, synthesizer: str, embedder: str,
                seed: int, rounds: Sequence[Sequence[str]], env: str) -> Memory:
    """The memory of ``design`` for one training stream on ``env`` (settings from the job's
    ``cell``; ``rounds``: the stream's episode ids, one list per round, which drive the
    selector's rotation).  A user's memory (``memory-<name>``) is built from the cell's
    ``memory`` entry with the same synthesizer, embedder and seed."""
    name = memory_name(design)
    if name is not None:
        return build(cell["memory"], MemoryContext(name=name, study="antipersist", env=env, synthesizer=synthesizer,
                                                   embedder=embedder, seed=seed))
    k, tokens, rs = int(cell["k"]), cell["synthesis"]["max_tokens"], int(cell["round_size"])
    common = {"synthesizer": synthesizer, "prompts_dir": prompts_dir, "max_tokens": tokens}
    if design == "react":
        return NoMemory()
    if design == "reflexion":
        from memtrials.memory.reflexion import ReflexionMemory

        # cross-task: held-out tasks never occur in training (docs/antipersist.md, "Baselines")
        return ReflexionMemory(**common, max_reflections=int(cell["reflexion"]["max_reflections"]),
                               embedder=embedder, k=k)
    if design == "expel":
        from memtrials.memory.expel import ExpeLMemory

        e = cell["expel"]
        return ExpeLMemory(**common, embedder=embedder, k=k, max_rules=int(e["max_rules"]),
                           success_chunk=int(e["success_chunk"]))
    if design == "autorefine":
        from memtrials.memory.autorefine import AutoRefineMemory

        a = cell["autorefine"]
        return AutoRefineMemory(**common, embedder=embedder, k=k, round_size=rs, prune_every=int(a["prune_every"]),
                                prune_fraction=float(a["prune_fraction"]))
    if design == "trajectory":
        from memtrials.memory.trajectory import TrajectoryMemory

        return TrajectoryMemory(embedder=embedder, k=k)
    if design in ("abstraction", "joint"):
        from memtrials.memory import abstraction

        cls = abstraction.AbstractionMemory if design == "abstraction" else abstraction.JointMemory
        return cls(synthesizer=synthesizer, embedder=embedder, prompts_dir=prompts_dir, k=k, max_tokens=tokens)
    if uses_selector(design):
        from memtrials.memory.antipersist import AntiPersistenceMemory
        from memtrials.stats.bandit import make_selector

        selector = make_selector(selector_settings(design, cell["selector"], seed), MODES,
                                 where="antipersist.selector")
        return AntiPersistenceMemory(synthesizer=synthesizer, embedder=embedder, prompts_dir=prompts_dir, k=k,
                                     persist=design == "antipersist-persisted", selector=selector,
                                     rounds=[list(r) for r in rounds], max_tokens=tokens)
    raise ValueError(f"antipersist: unknown design {design!r}")


def declared_calls(design: str, phase: str) -> dict[str, str] | None:
    """Purpose -> endpoint task (``chat`` / ``embed``) of the calls ``design``'s memory makes in
    ``phase`` (``train``: its learning and its retrieval; ``eval``: a frozen snapshot's retrieval
    only), where the memory class declares them (``calls``: ReAct none, ExpeL, AutoRefine); None
    where it does not (the estimate then counts the purposes the measured table holds)."""
    if design == "react":
        cls: Any = NoMemory
    elif design == "expel":
        from memtrials.memory.expel import ExpeLMemory as cls
    elif design == "autorefine":
        from memtrials.memory.autorefine import AutoRefineMemory as cls
    else:
        return None
    return {p: task for p, (task, when) in cls.calls.items() if phase == "train" or when == "serve"}
