"""The luck study's known-answer run (issue 38): the planted endpoint writes and reads on
worlds of their own, through the real client, cache and records, and the registered
analysis (``analysis.analyse``) estimates every contrast; the table puts the planted truth
(:func:`memtrials.studies.luck.planted.contrast_truth`, from the endpoint's declared rates)
beside each estimate.

It is not a registered run: it has its own worlds (``luck.known_answer``), is outside the
freeze and the records' lock, and never enters the panel's tables.  One rule job plays it
(``luck_known_answer``): worlds, writers, readers, analysis, table.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import pandas as pd

from memtrials.io import atomic_write_text, write_parquet
from memtrials.report.tables import write_table
from memtrials.report.truth import PLANTED_NOTE, coverage, coverage_line, truth_beside
from memtrials.studies.luck.analysis import Analysis, analyse
from memtrials.studies.luck.inference import Rules
from memtrials.studies.luck.planted import PlantedLuck, cell_truth, contrast_truth
from memtrials.studies.luck.simulate import gc_frozen

if TYPE_CHECKING:
    from memtrials.studies.luck.prompts import PromptSet
    from memtrials.studies.luck.worlds import World

log = logging.getLogger("memtrials.luck")

SHOWN = ("P2", "P3m", "A2", "L2", "A3", "L3", "L2b", "L3b", "T1", "T3", "Sus",
         "P2[RBD]", "P3m[RBD]", "P2[N]", "P3m[N]",
         "dP2[RBD-RB]", "dP3m[RBD-RB]", "dP2[N-RB]", "dP3m[N-RB]", "dA2[RBD-RB]", "dA2[N-RB]")
"""The contrasts of the table (every contrast is compared in ``known_answer.parquet``)."""

CAPTION = ("Known-answer run of *Lessons from Luck*: the planted agent ({model}, NOT a real model) wrote and read "
           "on {worlds} worlds of its own; each registered contrast's estimate with its 95 % t interval over "
           "worlds and, beside it, the value its declared rates imply (`truth`, computed, not measured); "
           "`reading`: the registered word for P2 and P3m under this run's thresholds. {coverage} " + PLANTED_NOTE)


def truth_frames(params: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(contrasts, cells) of the planted truth: ``quantity, truth`` and ``decision, outcome, arm, truth``."""
    p = PlantedLuck.from_params(params)
    c = pd.DataFrame([{"quantity": k, "truth": v} for k, v in contrast_truth(p).items()])
    cells = pd.DataFrame([{"decision": d, "outcome": o, "arm": a, "truth": v}
                          for (d, o, a), v in cell_truth(p).items()])
    return c, cells


def known_tables(a: Analysis, model: str, params: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(contrasts, cell rates) of ``model`` in analysis ``a`` with the truth beside each."""
    truth_c, truth_cells = truth_frames(params)
    q = a.quantities[(a.quantities.unit == model) & (a.quantities.subset == "all")]
    q = q[["quantity", "family", "n", "estimate", "lo", "hi"]]
    words = {r.contrast: r.label for r in a.readings.itertuples() if r.unit == model}
    contrasts = truth_beside(q, truth_c, ["quantity"], source="luck planted truth")
    contrasts["reading"] = contrasts["quantity"].map(words).fillna("")
    rates = a.cell_rates[a.cell_rates.unit == model][["decision", "outcome", "arm", "worse", "counted",
                                                      "rate", "lo", "hi"]]
    cells = truth_beside(rates.rename(columns={"rate": "estimate"}), truth_cells, ["decision", "outcome", "arm"],
                         source="luck planted cell truth")
    return contrasts, cells


async def play(config: Mapping[str, Any], *, model: str, worlds: list[World], prompts: PromptSet,
               calls_dir: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Lessons and answers of ``model`` on ``worlds``, through the real client (two call records)."""
    from memtrials.llm import open_client
    from memtrials.studies.luck.readers import read_answers
    from memtrials.studies.luck.writers import write_lessons

    d = Path(calls_dir)
    async with open_client(config, f"luck/known/{model}/writers", str(d / "lessons.calls.parquet")) as client:
        lessons = await write_lessons(client, model, worlds, prompts)
    async with open_client(config, f"luck/known/{model}/readers", str(d / "answers.calls.parquet")) as client:
        answers = await read_answers(client, model, worlds, prompts, lessons)
    return lessons, answers


async def known_answer(config: Mapping[str, Any], *, model: str, params: Mapping[str, Any],
                       cell: Mapping[str, Any], rules: Mapping[str, Any], prompts_dir: str, outdir: str,
                       tables_dir: str) -> pd.DataFrame:
    """The rule's entry: play ``model`` (a planted endpoint whose ``planted.params`` are
    ``params``) on ``cell``'s worlds, analyse, write the truth tables; returns the contrasts."""
    from memtrials.studies.luck.prompts import PromptSet
    from memtrials.studies.luck.readers import ANSWER_SCHEMA
    from memtrials.studies.luck.worlds import generate_worlds, worlds_frame
    from memtrials.studies.luck.writers import LESSON_SCHEMA

    w = cell["worlds"]
    worlds = generate_worlds(int(cell["seed"]), int(w["domains"]), int(w["per_domain"]), float(w["margin"]))
    out = Path(outdir)
    write_parquet(worlds_frame(worlds), out / "worlds.parquet")
    lessons, answers = await play(config, model=model, worlds=worlds, prompts=PromptSet.load(prompts_dir),
                                  calls_dir=str(out))
    write_parquet(lessons, out / "lessons.parquet", LESSON_SCHEMA)
    write_parquet(answers, out / "answers.parquet", ANSWER_SCHEMA)
    with gc_frozen():  # statsmodels' Holm calls gc.collect(): a second each with the client's objects alive
        a = analyse(answers, worlds_frame(worlds), Rules.from_config(dict(rules)), lessons)
    contrasts, cells = known_tables(a, model, params)
    write_parquet(contrasts, out / "known_answer.parquet")
    write_parquet(cells, out / "known_answer_cells.parquet")
    cov = coverage(contrasts)
    shown = contrasts[contrasts.quantity.isin(SHOWN)].copy()
    shown["order"] = shown.quantity.map({n: i for i, n in enumerate(SHOWN)})
    shown = shown.sort_values("order").drop(columns="order")
    caption = CAPTION.format(model=model, worlds=len(worlds), coverage=coverage_line(contrasts))
    write_table(shown, Path(tables_dir) / "known_answer", caption=caption, label="tab:luck-known-answer")
    write_table(cells, Path(tables_dir) / "known_answer_cells",
                caption=("Known-answer run, reader cells: worse-tool rate with its Wilson 95 % interval and the "
                         f"planted rate beside it. {coverage_line(cells)} " + PLANTED_NOTE),
                label="tab:luck-known-answer-cells")
    atomic_write_text(out / "coverage.json", pd.Series(cov).to_json())
    log.info("luck known-answer run (%s, %d worlds): %s", model, len(worlds), coverage_line(contrasts))
    return contrasts



def bench(size: int, seed: int) -> pd.DataFrame:
    """The known-answer benchmark's entry (``benchmarks/bench_known_answer.py``): the default
    config's run on about ``size`` worlds (16 domains, a multiple of 4 per domain) of world
    seed ``luck.known_answer.seed + seed``, its calls cached in a temporary folder; one row per
    contrast (``estimand``)."""
    import asyncio
    import tempfile

    from memtrials.config import REPO_ROOT, load_config, load_models

    cfg = load_config(REPO_ROOT / "config" / "config.yaml")
    ka = cfg["luck"]["known_answer"]
    params = dict(load_models(REPO_ROOT / cfg["models_file"])[ka["endpoint"]].planted.params)
    per_domain = max(4, 4 * round(size / 64))
    cell = {**ka, "seed": int(ka["seed"]) + int(seed), "worlds": {**ka["worlds"], "domains": 16,
                                                                  "per_domain": per_domain}}
    with tempfile.TemporaryDirectory() as tmp:
        cfg["cache"] = {**cfg["cache"], "path": f"{tmp}/llm.sqlite"}
        t = asyncio.run(known_answer(cfg, model=ka["endpoint"], params=params, cell=cell,
                                     rules=cfg["luck"]["analysis"], prompts_dir=str(REPO_ROOT / cfg["luck"]["prompts_dir"]),
                                     outdir=f"{tmp}/known", tables_dir=f"{tmp}/tables"))
    return t.rename(columns={"quantity": "estimand"})

