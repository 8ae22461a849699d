"""What the playbook study's design asks of its endpoints before any call (``python -m memtrials
estimate``): per setting (growth, model, benchmark, variant) its growth runs, practice rounds,
candidate choice, candidate evaluations and baselines, as
:class:`memtrials.pipeline.workload.Work` rows.

Actor calls are counted at the step cap (``playbook.actor.max_actions``, per benchmark
``playbook.actor_env``); the memory's calls (Reflector, Curator, Dynamic Cheatsheet's
rewrite, deduplication and block embeddings, the baselines' selection, judge and
similarity calls) differ by system and method, so they are counted per episode from the
measured table (:data:`memtrials.pipeline.workload.ANY`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memtrials.pipeline.workload import ANY, Work, tasks_of

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

        def add(part: str, episodes: int, cell: str, endpoint: str = memory) -> None:
            out.append(Work(part, m, "actor", units=episodes, steps=steps, jobs=1, episodes=episodes,
                            in_flight=flight, cell=cell))
            out.append(Work(part, endpoint, ANY, units=episodes, embedder=embedder, cell=cell))

        for k in range(1, runs + 1):
            add("growth", int(p["growth"]["train_tasks"]) * passes, f"{base}/growth/run{k}")
            add("practice", int(p["measurement"]["episodes"]), f"{base}/practice/run{k}")
        candidates = study.candidates(g)
        add("choice", len(candidates) * int(p["choice"]["episodes"]), f"{base}/choice")
        for c in candidates:
            add("eval", evals, f"{base}/eval/{c}")
        if g == "std":
            methods = study.baseline_methods(env, v)
            for method in methods:
                add("baseline", evals, f"{base}/baseline/{method}")
            if "pooled" in methods:
                add("pooled", int(p["baselines"]["pooled_episodes"]), f"{base}/pooled")
    return out


def profile_key(cell_id: str, purpose: str) -> tuple[str, str]:
    """``playbook/<growth>/<model>/<env>/<variant>/<part>/...`` -> ``<part>``."""
    parts: list[Any] = cell_id.split("/")
    return (parts[5] if len(parts) > 5 else parts[-1]), purpose
