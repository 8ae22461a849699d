"""What the playbook study's design asks of its endpoints before any call (``python -m memtrials
estimate``): per setting (growth, model, benchmark, variant) its growth runs, practice rounds,
candidate choice, candidate evaluations and baselines, as
:class:`memtrials.pipeline.workload.Work` rows.

Actor calls are counted at the step cap (``playbook.actor.max_actions``, per benchmark
``playbook.actor_env``); the memory's calls (Reflector, Curator, Dynamic Cheatsheet's
rewrite, deduplication and block embeddings, the baselines' selection, judge and
similarity calls) differ by system and method, so they are counted per episode from the
measured table (:data:`memtrials.pipeline.workload.ANY`).  A candidate's choice and evaluation
episodes serve a fixed playbook and make no other call.  Pooled's figures, until a run
measures them, are the practice round's (:func:`design_figures`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping

from memtrials.pipeline.workload import ANY, Profile, Work, tasks_of

if TYPE_CHECKING:
    from memtrials.studies.playbook.workflow import PlaybookWorkflow


def workload(study: PlaybookWorkflow) -> list[Work]:
    """The rows of every setting of ``study`` (none when disabled)."""
    if not study.enabled:
        return []
    p = study.p
    out: list[Work] = []
    flight = int(p["in_flight"])
    embedder = str(study.roles.get("embedder", ""))
    for g, m, env, v in study.settings():
        evals = tasks_of(env, study.splits(env)["eval"], p["evaluation"]["tasks"], study.config["envs"]) \
            * int(p["evaluation"]["seeds"])
        steps = int({**p["actor"], **(p["actor_env"].get(env) or {})}["max_actions"])
        runs = study.runs_of(g)
        passes = int(p["growth"]["max_passes"] if g == "std" else p["growth"]["long_passes"])
        memory = study.role("reflector", m)
        base = f"playbook/{g}/{m}/{env}/{v}"

        def add(part: str, episodes: int, cell: str, endpoint: str = memory, memory_calls: bool = True) -> None:
            out.append(Work(part, m, "actor", units=episodes, steps=steps, jobs=1, episodes=episodes,
                            in_flight=flight, cell=cell))
            if memory_calls:
                out.append(Work(part, endpoint, ANY, units=episodes, embedder=embedder, cell=cell))

        for k in range(1, runs + 1):
            add("growth", int(p["growth"]["train_tasks"]) * passes, f"{base}/growth/run{k}")
            add("practice", int(p["measurement"]["episodes"]), f"{base}/practice/run{k}")
        candidates = study.candidates(g)
        # a candidate's choice and evaluation episodes serve a fixed playbook: no call but the actor's
        add("choice", len(candidates) * int(p["choice"]["episodes"]), f"{base}/choice", memory_calls=False)
        for c in candidates:
            add("eval", evals, f"{base}/eval/{c}", memory_calls=False)
        if g == "std":
            methods = study.baseline_methods(env, v)
            for method in methods:
                add("baseline", evals, f"{base}/baseline/{method}")
            if "pooled" in methods:
                add("pooled", int(p["baselines"]["pooled_episodes"]), f"{base}/pooled")
    return out


def profile_key(cell_id: str, purpose: str) -> tuple[str, str]:
    """``playbook/<growth>/<model>/<env>/<variant>/<part>/...`` -> ``<part>``; Pooled's practice round
    (``.../practice/runpooled``, :func:`.baseline_eval.pooled_run`) -> ``pooled``, as its workload row."""
    parts: list[Any] = cell_id.split("/")
    if parts[5:7] == ["practice", "runpooled"]:
        return "pooled", purpose
    return (parts[5] if len(parts) > 5 else parts[-1]), purpose


def design_figures(study: PlaybookWorkflow, measured: Mapping[str, Profile]) -> dict[str, Profile]:
    """Figures of Pooled (``playbook/pooled/*``) where ``measured`` lacks them: its round is a
    practice round over the pooled playbook (:func:`.baseline_eval.pooled_run` calls
    :func:`.practice.practice_run`), so its actor calls are the measured practice round's
    (``playbook/practice/actor``); its lesson embeddings are K runs' playbooks embedded twice (the
    merge, then the round's blocks) where a practice round embeds one run's once, over
    ``baselines.pooled_episodes`` episodes where a practice round has ``measurement.episodes``."""
    p = study.p
    runs = int(p["choice"]["runs"] or study.runs_of("std"))
    scale = 2.0 * runs * int(p["measurement"]["episodes"]) / max(1, int(p["baselines"]["pooled_episodes"]))
    out: dict[str, Profile] = {}
    for key, f in measured.items():
        if not key.startswith("playbook/practice/") or f.source != "measured":
            continue
        purpose = key.removeprefix("playbook/practice/")
        embed = f.task == "embed"
        out[f"playbook/pooled/{purpose}"] = replace(
            f, calls_per_unit=f.calls_per_unit * (scale if embed else 1.0), calls=0, source="design",
            basis=("a practice round's lesson embeddings x 2 x K runs over the pooled episodes" if embed else
                   "Pooled's round is a practice round: playbook/practice's measured figures"))
    return {k: v for k, v in out.items() if k not in measured}
