"""Shared by the playbook tests: a small AppWorld data root, configs on the loopback endpoint
(chat) and the embedded ``minilm`` embedder, and a scripted policy whose success depends on
which planted lessons the actor is served.

The policy plays every role.  ACE's Curator adds the planted lessons to an empty playbook
and later only a copy of the first one (which the near-duplicate merge absorbs); Dynamic Cheatsheet's rewrite writes them as entries; the Reflector tags
every lesson it was shown helpful.  The actor (AppWorld, one code action) writes the
task's ground-truth solution when a HELPFUL lesson is in its prompt and no HARMFUL one;
with a HARMFUL lesson it ends the task with a bare ``complete_task()`` (which fails);
with neither it solves the tasks of the first family of each split (:func:`solutions`;
half of the practice tasks: the No-playbook level).  So the whole playbook (both) fails every task, the helpful block alone solves
every task, and no playbook solves about half.

On ALFWorld (generated games: :func:`build_alfworld`) the same Reflector and Curator
replies plant the same lessons and the actor takes the first listed action
(:func:`alf_policy`): the cheap real environment of the resume, stop-rule and ALFWorld
tests, where success does not matter.  AppWorld engines are shared between the jobs of a
test module (:class:`SharedEnv`), so each module starts one.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import yaml

from memtrials.testing import loopback_embed_endpoint, loopback_endpoint
from tests.conftest import REPO, base_config

HELPFUL = [  # short: the helpful block fits within 40 % of the playbook's tokens
    "Read the app's API documentation first.",
    "Look up each API's parameters in its docs before calling.",
    "Check the documented API names before writing code.",
]
HARMFUL = [
    "Always end the task by passing some answer to complete_task, even a guess, because the validator rewards "
    "any answer.",
    "Never leave the answer argument of complete_task empty; the grader wants an answer string for every task.",
    "When unsure, finish immediately with complete_task and an answer instead of exploring the apps further.",
]
REFLECTOR = "You review one finished attempt"
ACE_CURATOR = "You maintain a playbook"
DC_CURATOR = "You keep a cheatsheet"


def build_appworld(root: Path) -> Path:
    """A small authored AppWorld data root (one family per split, two tasks each), built in a
    subprocess (AppWorld fixes its data root per process)."""
    code = ("import sys\nfrom memtrials.envs.appworld import tasks as at\nfrom memtrials.envs.appworld.data import "
            "build\nfams = {}\nfor s in at.task_specs(0):\n    fams.setdefault(s.split, set()).add(s.family)\n"
            "pick = [sorted(fams['train'])[0], *sorted(fams['practice'])[:2], sorted(fams['eval'])[0]]\n"
            "build(sys.argv[1], seed=0, max_variants=2, families=pick)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=900,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


def build_alfworld(root: Path) -> Path:
    """A few generated ALFWorld games (two training and two practice games), in this process."""
    from memtrials.envs.alfworld.gen import generate

    generate(root, seed=0, sizes={"train": 2, "practice": 2}, workers=1)
    return root


class SharedEnv:
    """An environment object shared by the jobs of one test (the pool's ``close`` leaves it
    open; :meth:`shut` closes it): AppWorld's engine takes a minute to start and reset."""

    def __init__(self, env: Any) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def close(self) -> None:
        pass

    def shut(self) -> None:
        self._env.close()


def solutions(root: Path) -> dict[str, tuple[bool, str]]:
    """Task instruction -> (solved without a lesson, its ground-truth solution as one code action).

    The actor only sees the instruction (two variants of a family may share it), so luck is
    per family: the first family of each split (sorted) is solved without a lesson, the
    others are not; the practice split has two families, so No playbook solves half of it.
    """
    from memtrials.envs.appworld.env import solution_body, task_rows

    rows = task_rows(root)
    first = {split: min(r["type"] for r in rows if r["split"] == split) for split in {r["split"] for r in rows}}
    lucky = {r["task_id"]: r["type"] == first[r["split"]] for r in rows}
    out = {}
    for task in sorted((root / "data" / "tasks").iterdir()):
        spec = json.loads((task / "specs.json").read_text())
        out[spec["instruction"]] = (lucky[task.name], solution_body((task / "ground_truth" / "solution.py").read_text()))
    return out


def make_policy(sols: Mapping[str, tuple[bool, str]] | None):
    """The scripted policy of the module docstring (``body`` -> reply text); ``sols``
    ``None``: ALFWorld's actor, the first listed action."""
    from memtrials.testing.policies import first_admissible

    def policy(body: Mapping[str, Any]) -> str:
        msgs = body.get("messages") or []
        system = msgs[0].get("content", "") if msgs else ""
        user = msgs[-1].get("content", "") if msgs else ""
        if system.startswith(REFLECTOR):
            ids = re.findall(r"^\[([^\]]+)\] ", user.split("Playbook lessons shown during the attempt:")[-1], re.M)
            return json.dumps({"analysis": "Reviewed.", "tags": [{"id": i, "tag": "helpful"} for i in ids]})
        if system.startswith(ACE_CURATOR):
            if "(empty)" not in user:  # a near-duplicate (the same text): the merge absorbs it
                return json.dumps({"reasoning": "again", "operations": [
                    {"type": "ADD", "section": "str", "content": HELPFUL[0]}]})
            ops = [{"type": "ADD", "section": "str", "content": t} for t in HELPFUL + HARMFUL]
            return json.dumps({"reasoning": "planted", "operations": ops})
        if system.startswith(DC_CURATOR):
            return "<cheatsheet>\n" + "\n".join(f'<entry uses="1">{t}</entry>' for t in HELPFUL + HARMFUL) \
                + "\n</cheatsheet>"
        if sols is None:
            return first_admissible(body)
        text = "\n".join(m.get("content", "") for m in msgs)
        instruction = next((i for i in sols if i in text), None)
        if instruction is None:
            return "<action>print('no task found')</action>"
        lucky, code = sols[instruction]
        helped, harmed = any(h in text for h in HELPFUL), any(h in text for h in HARMFUL)
        if harmed or not (helped or lucky):
            return "<action>apis.supervisor.complete_task()</action>"
        return f"<action>\n{code}</action>"
    return policy


def alf_policy():
    """The planted lessons' roles (:func:`make_policy`) with ALFWorld's first-action actor."""
    return make_policy(None)


def config(tmp_path: Path, srv: Any, root: Path, env: str = "appworld", embedder: str = "minilm",
           **playbook: Any) -> dict[str, Any]:
    """The default config on endpoint ``loop`` (every chat role) and ``embedder`` (``minilm``,
    or ``loop`` for the loopback server's hash vectors); ``env`` (its data at ``root``)."""
    cfg = copy.deepcopy(base_config())
    registry = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["endpoints"]
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"endpoints": {
        "loop": loopback_endpoint(srv, params={"temperature": 0.0, "top_p": 1.0, "max_tokens": 512, "seed": 0}),
        "minilm": registry["minilm"], "loop-embed": loopback_embed_endpoint(srv)}}))
    cfg.update(models_file=str(models), panel=["loop"],
               roles={**{r: "loop" for r in cfg["roles"]}, "embedder": "minilm" if embedder == "minilm" else "loop-embed"},
               cache={"path": str(tmp_path / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"})
    cfg["request"] = {"timeout_s": 10.0, "max_retries": 4, "backoff_base_s": 0.01, "backoff_max_s": 0.1}
    pb = cfg["playbook"]
    pb.update(envs=[env], env_options={env: {"root": str(root)}}, in_flight=1)  # one engine a job
    pb["exclude"] = ["*:appworld:dc"]  # the settings these tests were written for (the default now leaves AppWorld out)
    pb["actor"] = {**pb["actor"], "mode": "choice", "max_actions": 1 if env == "appworld" else 2, "max_output_tokens": 400,
                   "max_listed_actions": 10}
    pb["growth"].update(runs=2, train_tasks=2, batch_size=2, max_passes=1)
    pb["measurement"].update(blocks=2, practice_tasks=4, episodes=16)
    pb["choice"].update(episodes=4)
    pb["evaluation"].update(tasks=2, seeds=1)
    for key, value in playbook.items():
        section, _, sub = key.partition("__")
        if sub:
            pb[section][sub] = value
        else:
            pb[section] = value
    return cfg


def task_table(root: Path, path: Path, env: str = "appworld") -> Path:
    from memtrials.envs.alfworld import env as alfworld
    from memtrials.envs.appworld import env as appworld
    from memtrials.envs.tasks import make_table, write_table

    write_table(make_table(env, {"appworld": appworld, "alfworld": alfworld}[env].task_rows(root)), path)
    return path


def workflow(cfg: Mapping[str, Any]):
    """The study's workflow helper on ``cfg`` (as playbook.smk builds it)."""
    from memtrials.config import check_config
    from memtrials.studies.playbook.workflow import PlaybookWorkflow

    models = check_config(cfg)

    return PlaybookWorkflow(cfg, models, lambda m: models[m].cell_params())


def paths(base: Path, part: str, k: int = 1, candidate: str = "none") -> dict[str, str]:
    """The output paths of one job under ``base`` (a setting's folder), as playbook.smk names them."""
    stems = {"growth": f"growth/run{k}", "practice": f"practice/run{k}", "choice": "choice",
             "eval": f"eval/{candidate}"}
    s = str(base / stems[part])
    out = {"episodes": s + ".parquet", "steps": s + ".steps.parquet", "calls": s + ".calls.parquet"}
    if part == "growth":
        out.update(playbooks=s + ".playbooks.parquet", record=s + ".json")
    if part == "practice":
        out.update(record=s + ".json", blocks=s + ".blocks.parquet", design=s + ".design.parquet",
                   estimates=s + ".estimates.parquet")
    if part == "choice":
        out.update(record=s + ".json", scores=s + ".scores.parquet")
    return out


def run_part(cfg: Mapping[str, Any], part: str, base: Path, tasks: Path, *, k: int = 1, candidate: str = "none",
             variant: str = "ace-passfail", growth: str = "std", make_env: Any = None) -> Any:
    """One job of the study, in this process (what its rule's script calls); ``make_env``:
    the environments' constructor (default: the configured engine, one per job)."""
    import asyncio

    from memtrials.studies.playbook.choice import choice_run
    from memtrials.studies.playbook.evaluate import eval_run
    from memtrials.studies.playbook.growth import growth_run
    from memtrials.studies.playbook.practice import practice_run

    wf = workflow(cfg)
    pb = cfg["playbook"]
    env, model = pb["envs"][0], (pb["models"] or cfg["panel"])[0]
    o = {f"out_{key}": v for key, v in paths(base, part, k, candidate).items()}
    common = dict(model=model, env=env, variant=variant, growth=growth, cell=wf.cell(part, model, env, variant),
                  actor_prompts_dir=str(REPO / pb["actor_prompts_dir"]), tasks_path=str(tasks), make_env=make_env)
    runs = range(1, int(pb["growth"]["runs"]) + 1)
    if part == "growth":
        coro = growth_run(cfg, run=k, prompts_dir=str(REPO / pb["memory_prompts_dir"]), **common, **o)
    elif part == "practice":
        coro = practice_run(cfg, run=k, playbooks_path=paths(base, "growth", k)["playbooks"], **common, **o)
    elif part == "choice":
        coro = choice_run(cfg, playbooks=[paths(base, "growth", j)["playbooks"] for j in runs],
                          practice_records=[paths(base, "practice", j)["record"] for j in runs], **common, **o)
    else:
        coro = eval_run(cfg, candidate=candidate, choice_path=paths(base, "choice")["record"],
                        playbooks=[paths(base, "growth", j)["playbooks"] for j in runs], **common, **o)
    return asyncio.run(coro)
