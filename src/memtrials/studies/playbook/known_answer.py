"""The playbook study's known-answer run (issue 38): the study's own jobs on the planted world
with the planted agent, in one job, then the truth beside each estimate.

``playbook.known_answer`` (config/config.yaml) names the planted endpoint (a registry entry of
provider ``planted`` whose policy is :func:`.planted.policy`; its ``params`` declare the
lesson bank) and the sizes.  :func:`known_config` derives the config of one setting from the
playbook section: env ``planted``, that model as actor, Reflector and Curator, ACE with pass/fail
feedback, no baselines, the known-answer sizes.  :func:`known_answer_run` then calls, in order,
the functions the study's rules call (:mod:`.growth`, :mod:`.practice`, :mod:`.choice`,
:mod:`.evaluate`) with that setting's cells from :class:`.workflow.PlaybookWorkflow`, writing
the setting's artifacts under ``results/playbook/std/<model>/planted/ace-passfail/`` as the
rules would, and writes the tables of :mod:`.known_answer_tables` (``ka_*``) under
``<out_dir>/tables``.  Every model call goes through the real client, cache and records.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from memtrials.report.known_answer import write_planted
from memtrials.studies.playbook.known_setting import ENV, VARIANT, known_config
from memtrials.studies.playbook import known_answer_tables as kt
from memtrials.studies.playbook.planted import Plant

TABLES = ("ka_blocks", "ka_candidates", "ka_methods", "ka_curation")


def plant_of(models: Mapping[str, Any], model: str) -> Plant:
    """The lesson bank the planted endpoint ``model`` declares (its registry entry's policy params)."""
    entry = models[model]
    params = None if entry.planted is None else entry.planted.params
    if params is None:
        raise ValueError(f"playbook.known_answer.model: endpoint {model!r} is not a planted endpoint (provider "
                         "planted, with planted.params); name one, e.g. planted-playbook")
    return Plant.of(params)


def setting_base(root: str | Path, model: str) -> Path:
    return Path(root) / "std" / model / ENV / VARIANT


async def _run(cfg: Mapping[str, Any], wf: Any, base: Path, tasks_path: str, actor_prompts_dir: str,
               memory_prompts_dir: str, make_env: Callable[[], Any] | None) -> dict[str, Any]:
    from memtrials.studies.playbook.choice import choice_run
    from memtrials.studies.playbook.evaluate import eval_run
    from memtrials.studies.playbook.growth import growth_run
    from memtrials.studies.playbook.practice import practice_run

    model = wf.models[0]
    common = dict(model=model, env=ENV, variant=VARIANT, growth="std", actor_prompts_dir=actor_prompts_dir,
                  tasks_path=tasks_path, make_env=make_env)
    runs = range(1, wf.runs + 1)

    def outs(stem: str, *extra: str) -> dict[str, str]:
        s = str(base / stem)
        o = {"out_episodes": s + ".parquet", "out_steps": s + ".steps.parquet", "out_calls": s + ".calls.parquet"}
        o.update({f"out_{x}": f"{s}.{x}.parquet" for x in extra if x != "record"})
        if "record" in extra:
            o["out_record"] = s + ".json"
        return o

    for k in runs:
        await growth_run(cfg, run=k, prompts_dir=memory_prompts_dir, cell=wf.cell("growth", model, ENV, VARIANT),
                         **common, **outs(f"growth/run{k}", "playbooks", "record"))
        await practice_run(cfg, run=k, playbooks_path=str(base / f"growth/run{k}.playbooks.parquet"),
                           cell=wf.cell("practice", model, ENV, VARIANT),
                           **common, **outs(f"practice/run{k}", "blocks", "design", "estimates", "record"))
    playbooks = [str(base / f"growth/run{k}.playbooks.parquet") for k in runs]
    await choice_run(cfg, playbooks=playbooks, practice_records=[str(base / f"practice/run{k}.json") for k in runs],
                     cell=wf.cell("choice", model, ENV, VARIANT), **common, **outs("choice", "scores", "record"))
    for cand in wf.candidates():
        await eval_run(cfg, candidate=cand, choice_path=str(base / "choice.json"), playbooks=playbooks,
                       cell=wf.cell("eval", model, ENV, VARIANT), **common, **outs(f"eval/{cand}"))
    return {"playbooks": playbooks, "practice": [str(base / f"practice/run{k}.json") for k in runs],
            "choice": str(base / "choice.json"), "eval": [str(base / f"eval/{c}.parquet") for c in wf.candidates()]}


def tables(plant: Plant, model: str, paths: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """The ``ka_*`` tables of a finished known-answer setting (``paths``: what :func:`_run` returns)."""
    choice = kt.read_json(paths["choice"])
    practice = [kt.read_json(p) for p in paths["practice"]]
    blocks = [r for rec, pb in zip(practice, paths["playbooks"]) for r in kt.block_rows(plant, rec, pb)]
    evals = {str(pd.read_parquet(p)["candidate"].iloc[0]): pd.read_parquet(p) for p in paths["eval"]}
    return {"ka_blocks": pd.DataFrame(blocks),
            "ka_candidates": pd.DataFrame(kt.candidate_rows(plant, choice, paths["playbooks"], evals)),
            "ka_methods": pd.DataFrame(kt.method_rows(plant, ("std", model, ENV, VARIANT), choice,
                                                      paths["playbooks"], paths["eval"])),
            "ka_curation": pd.DataFrame([kt.curation_rows(plant, rec, pb)
                                         for rec, pb in zip(practice, paths["playbooks"])])}


def known_answer_run(config: Mapping[str, Any], *, tasks_path: str, root: str, out_dir: str, actor_prompts_dir: str,
                     memory_prompts_dir: str, make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """The whole known-answer run (module docstring); returns its summary (also ``<out_dir>/summary.json``)."""
    from memtrials.config import check_config
    from memtrials.studies.playbook.workflow import PlaybookWorkflow

    cfg = known_config(config)
    models = check_config(cfg)
    wf = PlaybookWorkflow(cfg, models, lambda m: models[m].cell_params())
    model = wf.models[0]
    plant = plant_of(models, model)
    paths = asyncio.run(_run(cfg, wf, setting_base(root, model), tasks_path, actor_prompts_dir, memory_prompts_dir,
                             make_env))
    frames = tables(plant, model, paths)
    cur = frames["ka_curation"]
    return write_planted(frames, CAPTIONS, out_dir, model=model, env=ENV, variant=VARIANT,
                         kept_helpful=bool(cur["kept_helpful"].all()) if len(cur) else None,
                         dropped_harmful=bool(cur["dropped_harmful"].all()) if len(cur) else None)


CAPTIONS = {
    "ka_blocks": "Known-answer run (planted agent on the planted world, not a real model): every practice block's "
                 "with/without difference and 95 % interval (estimate, lo, hi; ridge beside it) against its planted "
                 "Banzhaf value (truth, exact enumeration of the declared chance); covered: truth inside the interval.",
    "ka_candidates": "Known-answer run (planted): every candidate's evaluation success with its Wilson 95 % interval "
                     "against the planted chance of the lessons the choice record says it serves (truth).",
    "ka_methods": "Known-answer run (planted): Table 1's methods computed by the study's own table code (estimate, "
                  "0-1; Wilson 95 % interval of the episodes of what it served) against the planted value of what "
                  "each should serve (truth; Whole and RBC-cut over the cut runs); the last row is RBC-cut minus "
                  "Whole, paired over the same evaluation tasks and seeds.",
    "ka_curation": "Known-answer run (planted): per run, the curated set (lesson codes) and its planted value, the "
                   "set the study's rule picks on the true block values, and the best set within the cap (exact).",
}


def benchmark(size: int, seed: int) -> pd.DataFrame:
    """The known-answer benchmark's entry (``benchmarks/bench_known_answer.py``): the default's
    known-answer setting with ``size`` practice episodes a run, ``size // 4`` evaluation tasks x 4
    seeds and ``size // 8`` choice episodes, seed ``seed``, in a temporary folder and cache; one
    row per interval (``estimand``: the table and its row)."""
    import tempfile

    from memtrials.config import REPO_ROOT, load_config
    from memtrials.envs.build import build_task_table
    from memtrials.envs.tasks import write_table as write_tasks

    config = load_config(REPO_ROOT / "config" / "config.yaml")
    ka = config["playbook"]["known_answer"]
    ka.update(seed=int(seed))
    ka["measurement"]["episodes"] = int(size)
    ka["choice"]["episodes"] = max(2, int(size) // 8)
    ka["evaluation"].update(tasks=max(2, int(size) // 4), seeds=4)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        config["cache"] = {**config["cache"], "path": str(t / "llm.sqlite"), "backend": "sqlite", "mode": "use"}
        write_tasks(build_task_table(ENV, config["envs"]), t / "planted.parquet")
        known_answer_run(config, tasks_path=str(t / "planted.parquet"), root=str(t / "results" / "playbook"),
                         out_dir=str(t / "ka"), actor_prompts_dir=str(REPO_ROOT / config["playbook"]["actor_prompts_dir"]),
                         memory_prompts_dir=str(REPO_ROOT / config["playbook"]["memory_prompts_dir"]))
        frames = {n: pd.read_csv(t / "ka" / "tables" / f"{n}.csv") for n in TABLES}
    label = {"ka_blocks": lambda r: f"block {r['lessons']}", "ka_candidates": lambda r: f"candidate {r['candidate']}",
             "ka_methods": lambda r: f"method {r['method']}"}
    rows = [df.assign(estimand=[f"{n}: {label[n](r)}" for _, r in df.iterrows()])
            for n, df in frames.items() if n in label and len(df)]
    out = pd.concat(rows, ignore_index=True).dropna(subset=["lo", "hi"])
    return out[["estimand", "estimate", "lo", "hi", "truth", "covered"]]
