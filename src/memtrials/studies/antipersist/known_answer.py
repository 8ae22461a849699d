"""The anti-persistence study's known-answer run (issue 38): its own training and evaluation
jobs on the planted world with the planted agent, in one job, then the truth beside each estimate.

``antipersist.known_answer`` (config/config.yaml) names the planted endpoint (provider
``planted``, policy :func:`.planted.policy`; its ``params`` declare the mode effects per
cluster and the planted abstraction error) and the sizes.  :func:`known_config` derives the
study's config for env ``planted`` and that model; :func:`known_answer_run` calls, per design
and seed, the functions the study's rules call (:func:`.train.train_stream`,
:func:`.evaluate.evaluate`, every round's snapshot evaluated), writing the streams' artifacts
under ``results/antipersist/<model>/planted/...`` as the rules would, and writes the tables of
:mod:`.planted_checks` (``ka_*``) under ``<out_dir>/tables``:

- ``ka_modes``: success per (mode shown, cluster) of the fixed-mode and selector designs, training
  and held-out episodes, beside the planted chance;
- ``ka_selector``: the selector's greedy choices of each cluster's best mode, beside chance;
- ``ka_flaws``: the planted error's reproduction through the lineage, beside its declared value;
- ``ka_rounds``: the trajectory design's held-out rounds against the stream's plan.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from memtrials.report.known_answer import write_planted
from memtrials.studies.antipersist.known_setting import ENV, known_config
from memtrials.studies.antipersist import planted_checks as pc
from memtrials.studies.antipersist.planted import AntiPlant

FIXED = ("fixed-none", "fixed-imitation", "fixed-strategic", "fixed-corrective")


def plant_of(models: Mapping[str, Any], model: str) -> AntiPlant:
    planted = models[model].planted
    params = None if planted is None else planted.params
    if params is None:
        raise ValueError(f"antipersist.known_answer.model: endpoint {model!r} is not a planted endpoint (provider "
                         "planted, with planted.params); name one, e.g. planted-antipersist")
    return AntiPlant.of(params)


async def _run(cfg: Mapping[str, Any], wf: Any, root: Path, tasks_path: str, prompts_dir: str,
               actor_prompts_dir: str, make_env: Callable[[], Any] | None) -> list[dict[str, Any]]:
    from memtrials.studies.antipersist.evaluate import evaluate
    from memtrials.studies.antipersist.train import train_stream

    model = wf.models[0]
    out = []
    for design in wf.designs:
        cell = wf.cell(model, ENV, design)
        for seed in wf.seeds:
            b = root / model / ENV / design / f"seed{seed}"
            paths = {"train": str(b / "train.parquet"), "memory": str(b / "memory.json"),
                     "rounds": str(b / "rounds.json"), "eval": str(b / "eval.parquet")}
            common = dict(model=model, env=ENV, design=design, seed_index=seed, cell=cell, prompts_dir=prompts_dir,
                          actor_prompts_dir=actor_prompts_dir, tasks_path=tasks_path, make_env=make_env)
            await train_stream(cfg, out_episodes=paths["train"], out_steps=str(b / "train.steps.parquet"),
                               out_calls=str(b / "train.calls.parquet"), out_memory=paths["memory"],
                               out_rounds=paths["rounds"], **common)
            await evaluate(cfg, memory_path=paths["memory"], rounds_path=paths["rounds"], every_round=True,
                           out_episodes=paths["eval"], out_steps=str(b / "eval.steps.parquet"),
                           out_calls=str(b / "eval.calls.parquet"), out_record=str(b / "eval.json"), **common)
            out.append({"design": design, "seed": seed, **paths})
    return out


def tables(plant: AntiPlant, streams: list[dict[str, Any]], cfg: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """The ``ka_*`` tables of finished known-answer streams (module docstring)."""
    a = cfg["antipersist"]
    read = {s["design"] + str(s["seed"]): (pd.read_parquet(s["train"]), pd.read_parquet(s["eval"])) for s in streams}
    by = lambda names: [(s, *read[s["design"] + str(s["seed"])]) for s in streams if s["design"] in names]  # noqa: E731
    final = int(a["rounds"])
    moded = [pd.concat([t, e[e["round"] == final]], ignore_index=True) for _, t, e in by((*FIXED, "antipersist"))]
    selector = [t[t["round"] > int(a["selector"]["rotate_rounds"])] for _, t, _ in by(("antipersist",))]
    flaw_streams = [(json.loads(Path(s["memory"]).read_text())["state"], t) for s, t, _ in by(("abstraction",))]
    rounds = [e.assign(seed=s["seed"]) for s, _, e in by(("trajectory",))]
    return {"ka_modes": pc.mode_cluster_table(pd.concat(moded, ignore_index=True), plant) if moded else pd.DataFrame(),
            "ka_selector": pc.selector_table(pd.concat(selector, ignore_index=True), plant) if selector else pd.DataFrame(),
            "ka_flaws": pc.flaw_table(flaw_streams, plant),
            "ka_rounds": pc.round_table(pd.concat(rounds, ignore_index=True), int(a["round_size"]), int(a["k"]))
            if rounds else pd.DataFrame()}


def known_answer_run(config: Mapping[str, Any], *, tasks_path: str, root: str, out_dir: str, prompts_dir: str,
                     actor_prompts_dir: str, make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """The whole known-answer run; returns its summary (also ``<out_dir>/summary.json``)."""
    from memtrials.config import check_config
    from memtrials.studies.antipersist.workflow import AntipersistWorkflow

    cfg = known_config(config)
    models = check_config(cfg)
    wf = AntipersistWorkflow(cfg, models, lambda m: models[m].cell_params())
    plant = plant_of(models, wf.models[0])
    streams = asyncio.run(_run(cfg, wf, Path(root), tasks_path, prompts_dir, actor_prompts_dir, make_env))
    frames = tables(plant, streams, cfg)
    sel = frames["ka_selector"]
    return write_planted(frames, CAPTIONS, out_dir, model=wf.models[0], env=ENV,
                         selector_above_chance=bool(sel["above_chance"].all()) if len(sel) else None)


CAPTIONS = {
    "ka_modes": "Known-answer run (planted agent on the planted world, not a real model): success per mode shown "
                "and task cluster (fixed-mode and selector designs, training and final held-out episodes), Wilson "
                "95 % interval, against the planted chance (truth); covered: truth inside the interval.",
    "ka_selector": "Known-answer run (planted): the share of the selector's greedy choices after the rotation that "
                   "took the cluster's planted best mode, against chance (1/4).",
    "ka_flaws": "Known-answer run (planted): P(flawed rule | the synthesis read an episode served a flawed rule) "
                "minus P(flawed | not), through the study's lineage counts with the planted flaws as labels, Newcombe "
                "95 % interval, against (after_failure - after_success) x effect (truth).",
    "ka_rounds": "Known-answer run (planted): per held-out round of the trajectory design, the latest trajectory "
                 "served and the number served per episode against the stream's plan (stored by that round; "
                 "min(k, stored)).",
}


def benchmark(size: int, seed: int) -> pd.DataFrame:
    """The known-answer benchmark's entry (``benchmarks/bench_known_answer.py``): the default's
    known-answer run with 6 rounds of ``size // 6`` training tasks (a pool of ``size // 3``),
    ``size // 8`` held-out tasks and selector seed ``seed``, in a temporary folder and cache; one
    row per interval (``estimand``: the table and its row)."""
    import tempfile

    from memtrials.config import REPO_ROOT, load_config
    from memtrials.envs.build import build_task_table
    from memtrials.envs.tasks import write_table as write_tasks

    config = load_config(REPO_ROOT / "config" / "config.yaml")
    config["antipersist"]["seed"] = int(seed)
    ka = config["antipersist"]["known_answer"]
    ka.update(rounds=6, round_size=max(2, int(size) // 6))
    ka["pool"].update(train_tasks=max(3, int(size) // 3), eval_tasks=max(3, int(size) // 8))
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        config["cache"] = {**config["cache"], "path": str(t / "llm.sqlite"), "backend": "sqlite", "mode": "use"}
        write_tasks(build_task_table(ENV, config["envs"]), t / "planted.parquet")
        known_answer_run(config, tasks_path=str(t / "planted.parquet"), root=str(t / "results" / "antipersist"),
                         out_dir=str(t / "ka"), prompts_dir=str(REPO_ROOT / config["antipersist"]["memory_prompts_dir"]),
                         actor_prompts_dir=str(REPO_ROOT / config["antipersist"]["actor_prompts_dir"]))
        modes = pd.read_csv(t / "ka" / "tables" / "ka_modes.csv")
        flaws = pd.read_csv(t / "ka" / "tables" / "ka_flaws.csv")
    rows = [modes.assign(estimand="mode x cluster " + modes["mode"] + "/" + modes["cluster"]),
            flaws.assign(estimand="flaw reproduction")]
    return pd.concat(rows, ignore_index=True)[["estimand", "estimate", "lo", "hi", "truth", "covered"]]
