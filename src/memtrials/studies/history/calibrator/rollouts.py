"""Full rollouts with the frozen calibrator (section 6.2): on the history study's tasks and
seeds (the same list as its Raw and Causal cells), the source actor chooses every action
while the calibrator role's endpoint reviews each completed non-terminal transition through
the step hook (:class:`memtrials.agent.review.ReviewHook`, the Appendix G.2 interface):
CALIBRATE puts its experience beside that transition, where it stays in every later
prompt (the Experience rendering of Appendix G.1); NOUPDATE leaves the history unchanged.
The reviewer sees the raw history through the latest action and its returned observation:
no reward, no score, no later action.

Also: which endpoints count as the trained calibrator (:func:`trained_endpoints`) and the
label every table gives the Calibrator rows (:func:`calibrator_label`; also the joint actor's
and the ablation's rows) and which dataset a declared checkpoint was trained on (:func:`trained_on`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrials.seeds import seed_of
from memtrials.studies.history.design import actor_settings, read_tasks
from memtrials.studies.history.calibrator.sft import MANIFEST, TRAINED_BY, weight_files, weights_digest
from memtrials.studies.history.rollouts import rollout_cell


def calibrator_settings(model: str, calibrator: str, actor: Mapping[str, Any], shuffle: str = "per_step") -> Any:
    """The actor of a Calibrator cell: the Experience rendering, reviews by ``calibrator``."""
    return actor_settings(model, "experience", actor, review_model=calibrator, shuffle=shuffle)


async def calibrator_rollouts(config: Mapping[str, Any], *, model: str, env: str, cell: Mapping[str, Any],
                              calibrator: str, actor_prompts_dir: str, tasks_path: str, out_episodes: str,
                              out_steps: str, out_calls: str, make_env: Any = None,
                              condition: str = "calibrator") -> None:
    """One Calibrator cell on the task list of the history study's (model, env) cells
    (``condition``: ``calibrator``, or ``calibrator-<variant>`` for Table 9's cells)."""
    tasks = read_tasks(tasks_path, int(cell["tasks_per_cell"]), cell["split"], int(cell["seed"]), env,
                       cell.get("task_types"))
    await _play(config, model=model, env=env, cell=cell, calibrator=calibrator, tasks=tasks, condition=condition,
                actor_prompts_dir=actor_prompts_dir, outs=(out_episodes, out_steps, out_calls), make_env=make_env)


async def _play(config: Mapping[str, Any], *, model: str, env: str, cell: Mapping[str, Any], calibrator: str,
                tasks: list[str], condition: str, actor_prompts_dir: str, outs: tuple[str, str, str],
                make_env: Any) -> None:
    """A Calibrator cell of ``model`` on ``tasks`` (their seeds from the cell's seed)."""
    seeds = [seed_of(int(cell["seed"]), env, t) for t in tasks]
    settings = calibrator_settings(model, calibrator, cell["actor"], cell["shuffle"])
    await rollout_cell(config, model=model, env=env, condition=condition, tasks=tasks, seeds=seeds,
                       settings=settings, actor_prompts_dir=actor_prompts_dir, in_flight=int(cell["in_flight"]),
                       out_episodes=outs[0], out_steps=outs[1], out_calls=outs[2],
                       env_options=cell["env_options"], make_env=make_env)


def training_tasks(tasks_path: str, cell: Mapping[str, Any], env: str) -> list[str]:
    """The tasks of a cell on the calibrator's training split, after checking that none is an
    evaluation task of the history study (``eval_split``, ``eval_seed``, ``eval_tasks_per_cell``).
    Both lists are drawn from ``task_types`` (``history.task_types`` of ``env``; absent or
    None: every type), so training tasks are of the evaluation's task types."""
    types = cell.get("task_types")
    tasks = read_tasks(tasks_path, int(cell["tasks_per_cell"]), cell["split"], int(cell["seed"]), env, types)
    evaluation = set(read_tasks(tasks_path, int(cell["eval_tasks_per_cell"]), cell["eval_split"],
                                int(cell["eval_seed"]), env, types))
    shared = sorted(set(tasks) & evaluation)
    if shared:
        raise ValueError(f"calibrator training rollouts on {env}: task(s) {shared[:5]} are also history evaluation "
                         f"tasks; set calibrator.splits.{env} to a split disjoint from history.splits.{env}")
    return tasks


async def joint_source_rollouts(config: Mapping[str, Any], *, model: str, env: str, cell: Mapping[str, Any],
                                calibrator: str, actor_prompts_dir: str, tasks_path: str, out_episodes: str,
                                out_steps: str, out_calls: str, make_env: Any = None) -> None:
    """Calibrator rollouts of ``model`` on the calibrator's training split (the joint actor's SFT
    data, section 6.4): the tasks and seeds of the Raw source cell of (model, env), so that the
    joint and action-only datasets come from the same training tasks and never an evaluation one."""
    await _play(config, model=model, env=env, cell=cell, calibrator=calibrator,
                tasks=training_tasks(tasks_path, cell, env), condition="calibrator-joint-source",
                actor_prompts_dir=actor_prompts_dir, outs=(out_episodes, out_steps, out_calls), make_env=make_env)


def checkpoint_digest(folder: str | Path) -> str:
    """The digest the training rule records for a checkpoint folder
    (:func:`~memtrials.studies.history.calibrator.sft.weights_digest`); a ValueError for a
    folder without weight files."""
    if not weight_files(Path(folder)):
        raise ValueError(f"{folder}: no weight files (*.safetensors, *.bin)")
    return weights_digest(Path(folder))


def trained_endpoints(declared: Mapping[str, str], calls: Mapping[str, Sequence[str]] | None = None,
                      served: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """The endpoints of ``declared`` (name -> checkpoint folder) whose folder holds a checkpoint
    the training rule wrote (its manifest says ``trained_by: calibrator_sft`` and its weights
    still match the manifest's digest): name -> {digest, label, examples}.  For an endpoint in
    ``served`` (an embedded checkpoint entry, whose records carry ``<model>@<digest>``) also every
    call recorded for it in ``calls[name]`` (calls Parquet files) must name that digest, and at
    least one must: a reply replayed from another checkpoint, or none at all, is not "trained".
    Any other endpoint is an untrained stand-in."""
    out = {}
    for name, folder in declared.items():
        man = Path(folder) / MANIFEST
        if not man.is_file():
            continue
        data = json.loads(man.read_text(encoding="utf-8"))
        ckpt = Path(folder) / data.get("checkpoint", "checkpoint")
        if not (data.get("trained_by") == TRAINED_BY and ckpt.is_dir() and checkpoint_digest(ckpt) == data.get("digest")):
            continue
        if name in served and recorded_digests((calls or {}).get(name, ()), name) != {str(data["digest"])}:
            continue
        recipe = data.get("recipe", {})
        out[name] = {"digest": str(data["digest"]), "examples": int(data.get("examples", 0)),
                     "label": str(recipe.get("label") or recipe.get("base_model", ""))}
    return out


def recorded_digests(paths: Sequence[str], endpoint: str) -> set[str]:
    """The checkpoint digests named by the calls recorded for ``endpoint`` in calls Parquet files
    (their ``model`` column, ``<model>@<digest>``; a call without one counts as ``""``)."""
    import pyarrow.parquet as pq

    out: set[str] = set()
    for p in paths:
        t = pq.read_table(p, columns=["endpoint", "model"]).to_pydict()
        out |= {m.partition("@")[2] for e, m in zip(t["endpoint"], t["model"]) if e == endpoint}
    return out


def trained_on(declared: Mapping[str, str], name: str) -> str | None:
    """The dataset (its file stem: ``full``, ``screen_only``, ``joint``, ``action_only``) that the
    checkpoint declared for endpoint ``name`` was trained on, per its manifest; None if not declared."""
    man = Path(declared[name]) / MANIFEST if name in declared else None
    if man is None or not man.is_file():
        return None
    return Path(str(json.loads(man.read_text(encoding="utf-8")).get("dataset", ""))).stem or None


def calibrator_label(endpoints: Sequence[str], trained: Mapping[str, Mapping[str, Any]],
                     title: str = "Calibrator") -> str:
    """``<title> (trained: <base> on N examples)`` when every endpoint is a verified trained
    checkpoint (:func:`trained_endpoints`), else ``<title> (untrained stand-in: <endpoint>)``."""
    names = sorted({str(e) for e in endpoints if e})
    who = ", ".join(names) or "endpoint not recorded"
    if names and set(names) <= set(trained):
        what = sorted({f"{trained[n]['label']} on {trained[n]['examples']} examples" for n in names})
        return f"{title} (trained: {'; '.join(what)})"
    return f"{title} (untrained stand-in: {who})"
