"""The calibrator's known-answer table (issue 38): the label chain's estimates on the
planted world with the planted calibrator, each with its 95 % interval and the planted truth
(:func:`memtrials.studies.history.calibrator.planted.truth`) beside it.

Rows: the generator's CALIBRATE share and the helpful share of its experiences; per kind the
screen's pass rate, the pair outcomes (win, loss) over every recipient's pair, the mean q(E)
and the label rule's CALIBRATE share among screened candidates; over all contexts the share of
CALIBRATE targets of each variant.  Shares carry Wilson intervals, the mean q(E) Student's t
on its support [-R, R].
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.report.truth import truth_beside
from memtrials.stats import t_interval, wilson_interval
from memtrials.studies.history.calibrator.planted import KINDS, PlantedCalibrator, experience_kind, truth


def _share(quantity: str, hits: pd.Series, level: float) -> dict[str, Any]:
    k, n = int(hits.sum()), int(hits.size)
    iv = wilson_interval(k, n, level)
    return {"quantity": quantity, "n": n, "estimate": iv.estimate, "lo": iv.lo, "hi": iv.hi, "interval": "Wilson"}


def estimates(labels: pd.DataFrame, compares: Sequence[pd.DataFrame], recipients: int,
              level: float = 0.95) -> pd.DataFrame:
    """One row per quantity: n, estimate, lo, hi (module docstring)."""
    lab = labels.assign(kind=[experience_kind(e) if isinstance(e, str) else None for e in labels["experience"]])
    cal = lab[lab["decision"] == "CALIBRATE"]
    rows = [_share("generator CALIBRATE", lab["decision"] == "CALIBRATE", level),
            _share("helpful share of E", cal["kind"] == "helpful", level)]
    pairs = pd.concat(list(compares), ignore_index=True) if compares else pd.DataFrame(columns=["context_id", "outcome"])
    kind_of = dict(zip(lab["context_id"], lab["kind"]))
    pairs = pairs.assign(kind=pairs["context_id"].map(kind_of))
    for k in KINDS:
        scr = cal[(cal["kind"] == k) & cal["screened"].astype(bool)]
        rows.append(_share(f"screen pass | {k}", scr["screen_passed"].astype(bool), level))
        pk = pairs[pairs["kind"] == k]
        rows.append(_share(f"win | {k}", pk["outcome"] == "win", level))
        rows.append(_share(f"loss | {k}", pk["outcome"] == "loss", level))
        passed = scr[scr["screen_passed"].astype(bool)]
        iv = t_interval(passed["q"].astype(float).to_numpy(), (-recipients, recipients), level)
        rows.append({"quantity": f"q(E) | {k}", "n": int(len(passed)), "estimate": iv.estimate, "lo": iv.lo,
                     "hi": iv.hi, "interval": "t"})
        rows.append(_share(f"target CALIBRATE | screened {k}", passed["target_full"] == "CALIBRATE", level))
    for v in ("full", "screen_only"):
        valid = lab[lab[f"target_{v}"].notna()]
        rows.append(_share(f"target CALIBRATE ({v})", valid[f"target_{v}"] == "CALIBRATE", level))
    return pd.DataFrame(rows)


def known_table(labels: pd.DataFrame, compares: Sequence[pd.DataFrame], params: Mapping[str, Any],
                recipients: int, level: float = 0.95) -> pd.DataFrame:
    """:func:`estimates` with the planted truth beside each (``truth``, ``covered``)."""
    t = truth(PlantedCalibrator.from_params(params), recipients)
    truth_df = pd.DataFrame({"quantity": list(t), "truth": list(t.values())})
    return truth_beside(estimates(labels, compares, recipients, level), truth_df, ["quantity"],
                        source="calibrator planted truth")


CAPTION = ("Known-answer run of the calibrator's label chain: the planted calibrator ({model}, NOT a real model) "
           "played the source actor, generator, judge and recipient on {contexts} decision contexts of the planted "
           "world; each estimate with its 95 % interval and, beside it, the value the declared rates imply (`truth`, "
           "computed by exact enumeration of the label rule, not measured). {coverage} ")


async def known_answer(config: Mapping[str, Any], *, model: str, params: Mapping[str, Any], cell: Mapping[str, Any],
                       actor: Mapping[str, Any], actor_prompts_dir: str, calibrator_prompts_dir: str, outdir: str,
                       tables_dir: str) -> pd.DataFrame:
    """The rule's entry: Raw source rollouts of ``model`` on the planted world's ``train``
    tasks, the contexts, the generator's reviews, the screen, the pairs and their judgements
    (every call through the real client), the labels, and the known-answer table."""
    import asyncio
    from pathlib import Path

    from memtrials.agent.prompts import ActorPrompts
    from memtrials.agent.records import table
    from memtrials.envs.planted.splits import task_rows
    from memtrials.io import write_parquet
    from memtrials.llm import open_client
    from memtrials.report.tables import write_table
    from memtrials.report.truth import PLANTED_NOTE, coverage_line
    from memtrials.seeds import seed_of
    from memtrials.studies.history.calibrator.compare import compare_pair
    from memtrials.studies.history.calibrator.contexts import eligible, sample_contexts
    from memtrials.studies.history.calibrator.dataset import label_rows
    from memtrials.studies.history.calibrator.generate import review_contexts
    from memtrials.studies.history.calibrator.prompts import CalibratorPrompts
    from memtrials.studies.history.calibrator.schemas import COMPARE_SCHEMA, GENERATE_SCHEMA, LABEL_SCHEMA, SCREEN_SCHEMA
    from memtrials.studies.history.calibrator.screen import candidates, screen_candidates
    from memtrials.studies.history.design import actor_settings
    from memtrials.studies.history.rollouts import rollout_cell

    out, env, seed = Path(outdir), "planted", int(cell["seed"])
    tasks = [r["task_id"] for r in task_rows({"train": int(cell["tasks"])})]
    episodes = await rollout_cell(
        config, model=model, env=env, condition="calibrator-known", tasks=tasks,
        seeds=[seed_of(seed, env, t) for t in tasks], settings=actor_settings(model, "raw", actor),
        actor_prompts_dir=actor_prompts_dir, in_flight=int(cell["in_flight"]),
        out_episodes=str(out / "sources.parquet"), out_steps=str(out / "sources.steps.parquet"),
        out_calls=str(out / "sources.calls.parquet"))
    steps = pd.read_parquet(out / "sources.steps.parquet")
    contexts = sample_contexts({(model, env): eligible(model, env, episodes, steps)}, int(cell["contexts"]), seed)
    hp, cp = ActorPrompts.load(actor_prompts_dir), CalibratorPrompts.load(calibrator_prompts_dir)
    max_tokens = cell["max_tokens"]
    async with open_client(config, f"calibrator/known/{model}", str(out / "labels.calls.parquet")) as client:
        generated = table(await review_contexts(client, hp, model, contexts, max_tokens), GENERATE_SCHEMA).to_pandas()
        cands = candidates(contexts, generated)
        screened = table(await screen_candidates(client, hp, cp, model, cands, max_tokens), SCREEN_SCHEMA).to_pandas()
        ok = set(screened.loc[screened["passed"].astype(bool), "context_id"])
        pairs = await asyncio.gather(*(
            compare_pair(client, hp, cp, actor=model, judge=model, c=c, exp=e, actor_cfg=actor,
                         judge_max_tokens=max_tokens) for c, e in cands if c.context_id in ok))
    compares = table(list(pairs), COMPARE_SCHEMA).to_pandas()
    labels = table(label_rows(contexts, generated, screened, [compares], 1), LABEL_SCHEMA).to_pandas()
    write_parquet(labels, out / "labels.parquet")
    write_parquet(compares, out / "compare.parquet")
    known = known_table(labels, [compares], params, recipients=1)
    write_parquet(known, out / "known_answer.parquet")
    caption = CAPTION.format(model=model, contexts=len(contexts), coverage=coverage_line(known)) + PLANTED_NOTE
    write_table(known, Path(tables_dir) / "known_answer", caption=caption, label="tab:calibrator-known-answer")
    return known


def bench(size: int, seed: int) -> pd.DataFrame:
    """The known-answer benchmark's entry (``benchmarks/bench_known_answer.py``): the default
    config's run on ``size`` contexts from ``size / 2`` planted train tasks (at most the
    split's), seed ``calibrator.known_answer.seed + seed``, its calls cached in a temporary
    folder; one row per quantity (``estimand``)."""
    import asyncio
    import tempfile

    from memtrials.config import REPO_ROOT, load_config, load_models

    cfg = load_config(REPO_ROOT / "config" / "config.yaml")
    ka = cfg["calibrator"]["known_answer"]
    params = dict(load_models(REPO_ROOT / cfg["models_file"])[ka["endpoint"]].planted.params)
    tasks = min(max(1, size // 2), int(cfg["envs"]["planted"]["sizes"]["train"]))
    cell = {**ka, "seed": int(ka["seed"]) + int(seed), "tasks": tasks, "contexts": int(size),
            "max_tokens": cfg["calibrator"]["review_max_tokens"]}
    with tempfile.TemporaryDirectory() as tmp:
        cfg["cache"] = {**cfg["cache"], "path": f"{tmp}/llm.sqlite"}
        t = asyncio.run(known_answer(cfg, model=ka["endpoint"], params=params, cell=cell,
                                     actor=cfg["history"]["actor"],
                                     actor_prompts_dir=str(REPO_ROOT / cfg["history"]["actor_prompts_dir"]),
                                     calibrator_prompts_dir=str(REPO_ROOT / cfg["calibrator"]["prompts_dir"]),
                                     outdir=f"{tmp}/known", tables_dir=f"{tmp}/tables"))
    return t.rename(columns={"quantity": "estimand"})
