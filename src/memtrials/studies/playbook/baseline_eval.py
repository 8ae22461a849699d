"""One baseline of one setting on the evaluation tasks (one job), and the pooled practice round.

Each job builds what the baseline serves (:mod:`.baselines`) from the setting's artifacts
(the runs' final playbooks, the practice rounds' records, designs and episodes, the choice
record) and plays it on the same evaluation tasks and seeds as every candidate
(:func:`.evaluate.eval_plan`).  A baseline that cuts a run does so for each of the first
``playbook.baselines.runs`` runs (null: all K; the paper cuts every run, as Whole is their
mean); Random plays two orders; Tags* and Top-k* play every variant, and the best on these
evaluation episodes is reported (tuned on evaluation, by design).  DC_self / DC_outcome
read the first ``dc_attempts`` episodes of the run's practice round (no new episode);
DG-Mem and All-positive read that round's estimates; ``subsampled`` serves the curated sets
rebuilt from the first 25/50/75/100 % of that round (:func:`.diagnostics.subsampled`, Table
17: only practice episodes choose, the evaluation episodes only score); Best-Full cut reads Best-Full's
choice.  The record (JSON) holds every variant's served lessons, the DC calls, and the
result with what the method was allowed to see.

Pooled (:func:`pooled_run`): the K runs' final playbooks pooled and merged
(:func:`.baselines.pooled_playbook`; embeddings by ``roles.embedder``), then one practice
round over ``m x K`` blocks with inclusion probability ``1/K``
(:func:`.practice.practice_run`), whose curated set the ``pooled`` baseline serves.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from memtrials.agent.job import open_job
from memtrials.agent.runner import EpisodeSpec
from memtrials.curation import curate
from memtrials.io import atomic_write_json, write_parquet
from memtrials.llm import open_client
from memtrials.memory.base import Lesson
from memtrials.studies.playbook import baselines as bl
from memtrials.studies.playbook import play
from memtrials.studies.playbook.design import actor_settings, env_options, role_tasks
from memtrials.studies.playbook.evaluate import eval_plan
from memtrials.studies.playbook.practice import json_ready, practice_run
from memtrials.studies.playbook.records import PLAYBOOK_SCHEMA, final_playbook, scores

if TYPE_CHECKING:
    from memtrials.llm import Client

log = logging.getLogger(__name__)


def _side(record_path: str, suffix: str) -> str:
    """A practice round's sibling artifact (``run1.json`` -> ``run1<suffix>``)."""
    return str(record_path).removesuffix(".json") + suffix


def _round_p(record_path: str) -> float:
    """The inclusion probability a practice round was drawn with (its record's ``p``)."""
    return float(json.loads(Path(record_path).read_text(encoding="utf-8"))["p"])


def _lessons(df: pd.DataFrame) -> list[Lesson]:
    return [Lesson(str(r.lesson_id), str(r.text), getattr(r, "section", None)) for r in df.itertuples(index=False)]


async def served_variants(method: str, cell: Mapping[str, Any], client: Client, runs: Sequence[str],
                          playbooks: Sequence[str], practice: Sequence[str], choice: Mapping[str, Any],
                          pooled: str | None, prompts_dir: str) -> tuple[list[tuple[str, str, Any, int | None]],
                                                                          dict[str, Any]]:
    """(variant, run, view, served tokens or None) of everything ``method`` serves, and notes."""
    b, meas = cell["baselines"], cell["measurement"]
    budget, embedder = float(meas["budget"]), cell["roles"]["embedder"]
    out: list[tuple[str, str, Any, int | None]] = []
    notes: dict[str, Any] = {"served": {}, "calls": []}

    def fixed(variant: str, run: str, whole: pd.DataFrame, ids: Sequence[str]) -> None:
        rows = bl.in_order(whole, ids)
        notes["served"][f"{variant}:{run}"] = [str(x) for x in rows["lesson_id"]]
        out.append((variant, run, play.view_of(rows, cell["grouped"]), int(rows["tokens"].sum()) if len(rows) else 0))

    def similar(variant: str, run: str, whole: pd.DataFrame, k: int | None, share: float) -> None:
        tok = dict(zip(whole["lesson_id"].astype(str), whole["tokens"].astype(int)))
        view = bl.SimilarityView(_lessons(whole), tok, embedder, k=k, cap=bl.cap_of(whole, share),
                                 grouped=bool(cell["grouped"]))
        notes["served"][f"{variant}:{run}"] = view.chosen  # filled per episode
        out.append((variant, run, view, None))

    if method == "best_full_cut":
        chosen = choice["best_full"]["chosen"]
        if chosen == "none":
            fixed("none", "none", pd.DataFrame(columns=["lesson_id", "text", "tokens"]), [])
        else:
            r = chosen.split(":", 1)[1]
            similar("cut", r, final_playbook(playbooks[runs.index(r)]), None, float(b["cut_share"]))
        return out, notes
    if method == "pooled":
        rec = json.loads(Path(str(pooled)).read_text(encoding="utf-8"))
        fixed("curated", "pooled", final_playbook(_side(str(pooled), ".playbooks.parquet")),
              rec["curated"]["lesson_ids"])
        return out, notes
    for r in cell["cut_runs"]:  # the same runs as RBC-cut and Whole in every table (workflow.cut_runs)
        i = runs.index(r)
        whole = final_playbook(playbooks[i])
        if method == "random":
            for o, ids in enumerate(bl.random_sets(whole, budget, seed=int(cell["seed"]) + i, orders=2), 1):
                fixed(f"o{o}", r, whole, ids)
        elif method == "own":
            fixed("own", r, whole, bl.budget_set(whole, bl.own_rank(whole), budget))
        elif method == "tags_star":
            for rule in bl.TAG_RULES:
                fixed(rule, r, whole, bl.budget_set(whole, bl.tag_rank(whole, rule), budget))
        elif method == "top_k":
            similar(f"k{int(b['top_k'])}", r, whole, int(b["top_k"]), budget)
        elif method == "topk_star":
            for k in b["k_values"]:
                similar(f"k{int(k)}", r, whole, int(k), budget)
        elif method in ("dc_self", "dc_outcome"):
            eps = pd.read_parquet(_side(practice[i], ".parquet")).sort_values("design_episode")
            eps = eps.head(int(b["dc_attempts"]))
            steps = pd.read_parquet(_side(practice[i], ".steps.parquet"))
            sel = await bl.dc_select(client, cell["roles"]["curator"], prompts_dir, whole, eps, steps,
                                     budget=budget, with_outcome=method == "dc_outcome",
                                     max_tokens=b["dc_max_tokens"])
            notes["calls"].append({"run": r, **{k: v for k, v in sel.items() if k != "keep"}, "keep": sel["keep"]})
            fixed("dc", r, whole, sel["keep"])
        elif method in ("judge", "judge_other"):
            from memtrials.curation import block_estimates

            eps = pd.read_parquet(_side(practice[i], ".parquet")).sort_values("design_episode")
            notes["judge_model"] = cell["roles"][method]
            labels = await bl.judge_labels(client, cell["roles"][method], prompts_dir, eps,
                                           pd.read_parquet(_side(practice[i], ".steps.parquet")))
            blocks = pd.read_parquet(_side(practice[i], ".blocks.parquet"))
            m = int(blocks["block"].max()) + 1 if len(blocks) else 0
            ids: list[str] = []
            if m:
                design = pd.read_parquet(_side(practice[i], ".design.parquet"))
                est = block_estimates(design, pd.DataFrame({"episode": labels["design_episode"].astype(int),
                                                            "score": labels["judged"]}), m).table
                tok = dict(zip(whole["lesson_id"].astype(str), whole["tokens"].astype(int)))
                block_tok = blocks.groupby("block")["lesson_id"].apply(lambda s: sum(tok[str(x)] for x in s))
                cur = curate(est["estimate"].to_numpy(), block_tok.reindex(range(m), fill_value=0).to_numpy(
                    dtype=np.int64), budget=budget, rule=meas["curate_rule"])
                ids = [str(x) for x, blk in zip(blocks["lesson_id"], blocks["block"]) if int(blk) in set(cur.blocks)]
                notes.setdefault("judge", {})[r] = {"estimates": est.to_dict("records"), "curated_blocks": list(
                    cur.blocks)}
            agree = float((labels["judged"].to_numpy() == eps["won"].astype(float).to_numpy()).mean()) if len(eps) \
                else float("nan")
            notes.setdefault("judge_agreement", {})[r] = agree
            fixed("judge", r, whole, ids)
        elif method == "subsampled":
            from memtrials.studies.playbook.diagnostics import subsampled

            rec = json.loads(Path(practice[i]).read_text(encoding="utf-8"))
            eps = pd.read_parquet(_side(practice[i], ".parquet"))
            sc = pd.DataFrame({"episode": eps["design_episode"].astype(int), "score": scores(eps)})
            tok = np.asarray([x["tokens"] for x in rec["block_lessons"]], dtype=np.int64)
            blocks = pd.read_parquet(_side(practice[i], ".blocks.parquet"))
            sub = subsampled(pd.read_parquet(_side(practice[i], ".design.parquet")), sc, tok, budget=budget,
                             rule=meas["curate_rule"])
            for row in sub.itertuples(index=False):
                keep = set(row.blocks)
                fixed(f"f{int(round(100 * row.fraction))}", r, whole,
                      [str(x) for x, blk in zip(blocks["lesson_id"], blocks["block"]) if int(blk) in keep])
        elif method in ("dgmem", "all_positive"):
            blocks = pd.read_parquet(_side(practice[i], ".blocks.parquet"))
            if method == "all_positive":
                ids = bl.positive_blocks(pd.read_parquet(_side(practice[i], ".estimates.parquet")), blocks)
            else:
                eps = pd.read_parquet(_side(practice[i], ".parquet"))
                ids, table = bl.dgmem_curated(pd.read_parquet(_side(practice[i], ".design.parquet")), eps, blocks,
                                              whole, budget, p=_round_p(practice[i]),
                                              rule=meas["curate_rule"])
                notes.setdefault("dgmem", {})[r] = table.to_dict("records")
            fixed(method, r, whole, ids)
        else:
            raise ValueError(f"baseline {method!r}: expected one of {', '.join(bl.METHODS)}")
    return out, notes


async def baseline_run(config: Mapping[str, Any], *, model: str, env: str, variant: str, growth: str, method: str,
                       cell: Mapping[str, Any], actor_prompts_dir: str, prompts_dir: str, tasks_path: str,
                       playbooks: Sequence[str], practice_records: Sequence[str], choice_path: str,
                       pooled_record: str | None, out_episodes: str, out_steps: str, out_calls: str,
                       out_record: str, make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Play baseline ``method`` of one setting on the evaluation tasks (module docstring)."""
    seed, ev = int(cell["seed"]), cell["evaluation"]
    tasks = role_tasks(pd.read_parquet(tasks_path), cell["splits"]["eval"], ev["tasks"], seed, tasks_path,
                       "playbook.evaluation.tasks")
    choice = json.loads(Path(choice_path).read_text(encoding="utf-8"))
    runs = list(choice["runs"])
    cell_id = f"playbook/{growth}/{model}/{env}/{variant}/baseline/{method}"
    plan = eval_plan(tasks, int(ev["seeds"]), seed, env)
    async with open_client(config, cell_id + "/select", _side(out_record, ".select.calls.parquet")) as client:
        served, notes = await served_variants(method, cell, client, runs, playbooks, practice_records, choice,
                                              pooled_record, prompts_dir)
    specs = []
    for vname, run, view, tokens in served:
        name = bl.candidate_name(method, vname, run)
        specs += [EpisodeSpec(env, t, f"{cell_id}/{vname}/{run}/{t}/{j}", s, actor_settings(model, cell["actor"], s),
                              memory=view, columns=play.columns(round="eval", split="eval", candidate=name,
                                                                design_episode=j, served_tokens=tokens))
                  for t, j, s in plan]
    async with open_job(config, cell_id, out_calls, actor_prompts_dir, env=env, in_flight=int(cell["in_flight"]),
                        episodes=len(specs), env_options=env_options(cell, env), make_env=make_env) as (runner, client):
        client.expect(len(specs) * int(cell["actor"]["max_actions"]))
        episodes = await runner.concurrent(specs)
    table = play.write(episodes, model, env, f"{variant}/{growth}/baseline/{method}", out_episodes, out_steps)
    result = bl.method_result(method, table)
    record = {"model": model, "env": env, "variant": variant, "growth": growth, "method": method,
              "eval_tasks": tasks, "episodes": len(specs), "result": result, **notes}
    atomic_write_json(out_record, json_ready(json.loads(json.dumps(record, default=str))))
    log.info("%s: %s scores %.1f", cell_id, result["label"], result["score"])
    return record


def pooled_share(run_tokens: Sequence[int], pool_tokens: int, budget: float) -> float:
    """The share of the pool's tokens that Pooled may serve: the same budget B as one run's (B x the
    runs' mean whole-playbook tokens), not B of the K-times larger pool; at most the whole pool."""
    mean = float(np.mean(run_tokens)) if len(run_tokens) else 0.0
    return min(1.0, budget * mean / pool_tokens) if pool_tokens and mean else budget


async def pooled_run(config: Mapping[str, Any], *, model: str, env: str, variant: str, growth: str,
                     cell: Mapping[str, Any], actor_prompts_dir: str, tasks_path: str, playbooks: Sequence[str],
                     out_playbooks: str, out_blocks: str, out_design: str, out_estimates: str, out_episodes: str,
                     out_steps: str, out_calls: str, out_record: str,
                     make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Pool the K runs, merge near-duplicates, and run one practice round over m x K blocks at 1/K
    (K: Table 1's, ``choice.runs``; the runs grown beyond it only extend Figure 6)."""
    playbooks = list(playbooks)[:int(cell["choice"]["runs"] or len(playbooks))]
    frames = [final_playbook(p) for p in playbooks]
    texts = [str(t) for f in frames for t in f["text"]]
    cell_id = f"playbook/{growth}/{model}/{env}/{variant}/pooled"
    async with open_client(config, cell_id + "/merge", _side(out_record, ".merge.calls.parquet")) as client:
        vectors = (await client.embed(cell["roles"]["embedder"], texts, purpose="pooled_merge")).vectors if texts \
            else []
    pooled = bl.pooled_playbook(frames, np.asarray(vectors, dtype=float), float(cell["baselines"]["merge_threshold"]))
    keep = [f.name for f in PLAYBOOK_SCHEMA]
    write_parquet(pooled.assign(**{"pass": 1})[keep] if len(pooled) else pd.DataFrame(columns=keep), out_playbooks,
                  schema=PLAYBOOK_SCHEMA)
    k = len(playbooks)
    run_tokens = float(np.mean([int(f["tokens"].sum()) if len(f) else 0 for f in frames])) if frames else 0.0
    pool_tokens = int(pooled["tokens"].sum()) if len(pooled) else 0
    budget = float(cell["measurement"]["budget"])
    pooled_budget = pooled_share([int(f["tokens"].sum()) if len(f) else 0 for f in frames], pool_tokens, budget)
    meas = {**cell["measurement"], "blocks": int(cell["measurement"]["blocks"]) * k, "p": 1.0 / k,
            "episodes": int(cell["baselines"]["pooled_episodes"]), "budget": pooled_budget}
    rec = await practice_run(config, model=model, env=env, variant=variant, growth=growth, run="pooled",  # type: ignore[arg-type]
                             cell={**cell, "measurement": meas}, actor_prompts_dir=actor_prompts_dir,
                             tasks_path=tasks_path, playbooks_path=out_playbooks, out_blocks=out_blocks,
                             out_design=out_design, out_estimates=out_estimates, out_episodes=out_episodes,
                             out_steps=out_steps, out_calls=out_calls, out_record=out_record, make_env=make_env)
    rec["pooled"] = {"runs": k, "lessons_in": len(texts), "lessons": int(len(pooled)),
                     "budget": {"B": budget, "run_tokens_mean": run_tokens, "pool_tokens": pool_tokens,
                                "share_of_pool": pooled_budget, "cap_tokens": budget * run_tokens},
                     "merged": {str(r.lesson_id): list(r.merged) for r in pooled.itertuples() if len(r.merged)}}
    atomic_write_json(out_record, json_ready(rec))
    return rec
