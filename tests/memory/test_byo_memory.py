"""Bring your own memory: the example of docs/memory.md (``examples/byo_memory/notes_memory.py``),
named in the config only, through three studies' protocols on generated ALFWorld games and
the loopback endpoint, and the registry's errors.

The loopback policy plays the first listed action (every episode of 2 actions fails) and
answers the notes prompt with a note naming the task.  So the memory writes one note per
episode, and what it serves next is known: the tests check that its notes were served
(the step records' ``memory_ids``), learned (its snapshots) and that the calls it made are
in the jobs' call records.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from memtrials.config import ConfigError, check_config
from memtrials.llm import read_records
from memtrials.memory.registry import BUILTIN, LIFECYCLE, PLAYBOOK, check_class, memory_class
from memtrials.memory.snapshot import read_snapshot
from memtrials.testing.policies import first_admissible
from tests.conftest import REPO, base_config
from tests.playbook.helpers import config as playbook_config
from tests.playbook.helpers import paths, run_part, task_table

EXAMPLE = REPO / "examples" / "byo_memory"
NOTES = {"notes": {"class": "notes_memory:NotesMemory", "options": {"k": 2}}}
PROMPT_HEAD = "An agent did not complete this task."


def policy(body):
    """The note names the task; every other request gets the first listed action."""
    text = (body.get("messages") or [{}])[-1].get("content", "")
    if text.startswith(PROMPT_HEAD):
        return "For '" + re.search(r"Task: (.*)", text).group(1)[:40] + "': look inside every receptacle first."
    return first_admissible(body)


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    """Generated ALFWorld games (train, practice and eval splits) and their task table."""
    from memtrials.envs.alfworld.gen import generate

    root = tmp_path_factory.mktemp("byo-alfworld") / "games"
    generate(root, seed=0, sizes={"train": 2, "practice": 2, "eval": 1}, workers=1)
    return root, task_table(root, root.parent / "tasks.parquet", "alfworld")


@pytest.fixture
def example(monkeypatch):
    """The example's folder on sys.path, as PYTHONPATH=examples/byo_memory puts it for a run."""
    monkeypatch.syspath_prepend(str(EXAMPLE))


def loop_config(loopback, tmp_path, root, **playbook):
    """The default config on the loopback endpoint (chat, and embeddings as ``roles.embedder``),
    the playbook study on the games (:func:`tests.playbook.helpers.config`), the example named
    in its ``memory`` section."""
    srv = loopback(policy=policy, embed_dim=32)
    cfg = playbook_config(tmp_path, srv, root, env="alfworld", embedder="loop", **playbook)
    cfg["memory"] = NOTES
    return cfg


def build(study_cls, cfg):
    reg = check_config(cfg)
    return study_cls(cfg, reg, lambda m: reg[m].cell_params())


def notes_of(snap):
    assert snap["kind"] == "notes"
    return snap["state"]["notes"]


def served(steps: pd.DataFrame) -> list[list[str]]:
    return [json.loads(x) for x in steps.sort_values(["episode_id", "step"])["memory_ids"]]


def assert_calls_recorded(notes, calls_path):
    calls = read_records(calls_path).to_pandas()
    made = calls[calls["purpose"] == "notes"]
    assert sorted(made["call_id"]) == sorted(n["call_id"] for n in notes) and len(made) >= 1


@pytest.mark.slow
def test_the_example_grows_as_a_playbook_and_goes_through_practice_and_choice(games, example, loopback, tmp_path):
    root, tasks = games
    cfg = loop_config(loopback, tmp_path, root, systems=["memory-notes"], growth__runs=1, growth__batch_size=1,
                      measurement__practice_tasks=2, measurement__episodes=4, choice__episodes=1,
                      evaluation__tasks=1)
    base = tmp_path / "results/playbook/std/loop/alfworld/memory-notes"
    growth = run_part(cfg, "growth", base, tasks, variant="memory-notes")
    practice = run_part(cfg, "practice", base, tasks, variant="memory-notes")
    choice = run_part(cfg, "choice", base, tasks, variant="memory-notes")

    notes = notes_of(growth["memory"])  # learned: one note per failed training episode, served as the playbook
    assert [n["id"] for n in notes] == ["note-0001", "note-0002"]
    pb = pd.read_parquet(paths(base, "growth")["playbooks"])
    assert list(pb["lesson_id"]) == ["note-0001", "note-0002"] and list(pb["text"]) == [n["text"] for n in notes]
    assert set(pb["section"]) == {"notes"} and pb["helpful"].isna().all() and pb["uses"].isna().all()
    assert growth["stop_rule"] and growth["calls"]["notes"]["calls"] == 2
    # batches of one: the second training episode was served the first one's note
    assert served(pd.read_parquet(paths(base, "growth")["steps"]))[-1] == ["note-0001"]
    assert_calls_recorded(notes, paths(base, "growth")["calls"])
    # the practice round blocked the notes and served each episode the blocks it included
    blocks = practice["blocks"]["blocks"]
    assert sorted(i for b in blocks for i in b) == ["note-0001", "note-0002"] and practice["episodes"] == 4
    episodes = pd.read_parquet(paths(base, "practice")["episodes"]).set_index("episode_id")
    steps = pd.read_parquet(paths(base, "practice")["steps"])
    for eid, grp in steps.groupby("episode_id"):
        want = {i for b, z in enumerate(episodes.loc[eid, "inclusion"]) if z == "1" for i in blocks[b]}
        assert all(set(ids) == want for ids in served(grp))
    assert set(practice["curated"]["lesson_ids"]) <= {"note-0001", "note-0002"}
    assert choice["candidates"][1]["lesson_ids"] == ["note-0001", "note-0002"]  # whole:run1 serves the notes
    assert choice["rbc"]["chosen"] in {"curated:run1", "whole:run1", "none"}


async def _antipersist(cfg, wf, root, tasks, out: Path) -> None:
    from memtrials.studies.antipersist.evaluate import evaluate
    from memtrials.studies.antipersist.train import train_stream

    common = dict(model="loop", env="alfworld", design="memory-notes", seed_index=1,
                  cell=wf.cell("loop", "alfworld", "memory-notes"), prompts_dir=os.path.dirname(wf.prompt_files()[0]),
                  actor_prompts_dir=os.path.dirname(wf.actor_prompt_files()[0]), tasks_path=str(tasks))
    await train_stream(cfg, **common, out_episodes=str(out / "train.parquet"),
                       out_steps=str(out / "train.steps.parquet"), out_calls=str(out / "train.calls.parquet"),
                       out_memory=str(out / "memory.json"), out_rounds=str(out / "rounds.json"))
    await evaluate(cfg, **common, memory_path=str(out / "memory.json"), out_episodes=str(out / "eval.parquet"),
                   out_steps=str(out / "eval.steps.parquet"), out_calls=str(out / "eval.calls.parquet"),
                   out_record=str(out / "eval.json"))


@pytest.mark.slow
def test_the_example_is_trained_on_a_stream_and_evaluated_frozen(games, example, loopback, tmp_path):
    from memtrials.studies.antipersist.workflow import AntipersistWorkflow

    root, tasks = games
    cfg = loop_config(loopback, tmp_path, root)
    cfg["antipersist"].update(envs=["alfworld"], designs=["memory-notes"], rounds=2, round_size=1, batch_size=1,
                              pools={"alfworld": {"train_split": "train", "train_tasks": 2, "eval_split": "eval",
                                                  "eval_tasks": 1}},
                              env_options={"alfworld": {"root": str(root)}})
    wf = build(AntipersistWorkflow, cfg)
    assert wf.cell("loop", "alfworld", "memory-notes")["memory"] == {"name": "notes", **NOTES["notes"]}
    out = tmp_path / "antipersist"
    asyncio.run(_antipersist(cfg, wf, root, tasks, out))

    notes = notes_of(read_snapshot(out / "memory.json"))
    assert [n["id"] for n in notes] == ["note-0001", "note-0002"]  # one per failed round
    train = pd.read_parquet(out / "train.parquet").sort_values("round")
    assert list(train["design"]) == ["memory-notes"] * 2 and not train["won"].any()
    steps = pd.read_parquet(out / "train.steps.parquet").merge(train[["episode_id", "round"]], on="episode_id")
    assert [json.loads(x) for x in steps.sort_values(["round", "step"])["memory_ids"]] == [[], [], ["note-0001"],
                                                                                          ["note-0001"]]
    rounds = json.loads((out / "rounds.json").read_text())
    assert [len(s["state"]["notes"]) for s in rounds["snapshots"]] == [1, 2]
    assert rounds["calls"]["by_purpose"]["notes"] == 2
    assert_calls_recorded(notes, out / "train.calls.parquet")
    # frozen: the held-out episode is served both notes (k = 2), the memory is unchanged, no note is written
    record = json.loads((out / "eval.json").read_text())
    assert record["memory_unchanged"] and record["calls"]["by_purpose"] == {"actor": 2}
    assert all(ids == ["note-0001", "note-0002"] for ids in served(pd.read_parquet(out / "eval.steps.parquet")))


@pytest.mark.slow
def test_the_example_is_served_at_resumption_in_a_history_continuation(games, example, loopback, tmp_path):
    from memtrials.studies.history import entry
    from memtrials.studies.history.design import actor_settings
    from memtrials.studies.history.rollouts import rollout_cell
    from memtrials.studies.history.workflow import HistoryWorkflow

    root, tasks = games
    cfg = loop_config(loopback, tmp_path, root)
    h = cfg["history"]
    h.update(envs=["alfworld"], env_options={"alfworld": {"root": str(root)}}, task_types={"alfworld": None},
             tasks={"alfworld": None})
    h["actor"] = {**h["actor"], "max_actions": 2}
    h["continuation"].update(conditions=["raw", "memory-notes"], chat_conditions=[])
    wf = build(HistoryWorkflow, cfg)
    assert wf.memory_conditions == ["memory-notes"] and wf.view_conditions == ["raw"]
    cell = wf.cell("loop", "alfworld", "continuation", "memory-notes")
    assert cell["memory"]["class"] == "notes_memory:NotesMemory" and cell["embedder"]["name"] == "loop-embed"
    assert "memory" not in wf.cell("loop", "alfworld", "continuation", "raw")
    prompts = os.path.dirname(wf.actor_prompt_files()[0])
    task = str(pd.read_parquet(tasks).query("split == 'eval'")["task_id"].iloc[0])
    asyncio.run(rollout_cell(  # the Raw source: 6 actions, none wins; k = 2, m = 4
        cfg, model="loop", env="alfworld", condition="raw", tasks=[task], seeds=[0],
        settings=actor_settings("loop", "raw", {**h["actor"], "max_actions": 6}), actor_prompts_dir=prompts,
        in_flight=1,
        out_episodes=str(tmp_path / "raw.parquet"), out_steps=str(tmp_path / "raw.steps.parquet"),
        out_calls=str(tmp_path / "raw.calls.parquet"), env_options=h["env_options"]["alfworld"]))
    out = {k: str(tmp_path / f"memory-notes.{k}") for k in ("parquet", "steps.parquet", "calls.parquet", "memory.json")}
    asyncio.run(entry.continuation(
        cfg, model="loop", env="alfworld", condition="memory-notes", cell=cell, actor_prompts_dir=prompts,
        episodes_path=str(tmp_path / "raw.parquet"), steps_path=str(tmp_path / "raw.steps.parquet"),
        out_episodes=out["parquet"], out_steps=out["steps.parquet"], out_calls=out["calls.parquet"],
        out_memory=out["memory.json"]))

    snap = read_snapshot(out["memory.json"])
    notes = notes_of(snap)  # learned from the source cut after step m, before the continuation
    source = pd.read_parquet(tmp_path / "raw.parquet")["episode_id"].iloc[0]
    assert [n["episode"] for n in notes] == [source] and snap["sources"] == [source]
    eps = pd.read_parquet(out["parquet"])
    assert list(eps["condition"]) == ["memory-notes"] and list(eps["restored_step"]) == [2]
    steps = pd.read_parquet(out["steps.parquet"])
    assert list(steps["step"]) == [3, 4] and served(steps) == [["note-0001"], ["note-0001"]]
    assert_calls_recorded(notes, out["calls.parquet"])
    calls = read_records(out["calls.parquet"]).to_pandas()
    prompt = json.loads(calls[calls["purpose"] == "notes"]["messages"].iloc[0])[-1]["content"]
    src_steps = pd.read_parquet(tmp_path / "raw.steps.parquet").sort_values("step")
    assert prompt.count("\n- ") == 3 and f"- {src_steps['action'].iloc[3]} -> " in prompt  # steps 2..4 of 6


@pytest.mark.slow
def test_snakemake_runs_the_memory_condition_rule_with_the_module_on_pythonpath(games, tmp_path):
    """Rule history_continuation_memory through Snakemake (parse-time checks, params, the job
    server, the script, the snapshot output), the example found through PYTHONPATH only."""
    from memtrials.testing import LoopbackServer, loopback_embed_endpoint, loopback_endpoint
    from tests.conftest import copy_workflow, failure_text, run_snakemake

    root, tasks = games
    wf = copy_workflow(tmp_path / "wf")
    (wf / "results" / "tasks").mkdir(parents=True)
    (wf / "results" / "tasks" / "alfworld.parquet").write_bytes(Path(tasks).read_bytes())
    with LoopbackServer(policy=policy) as srv:
        endpoints = {"loop": loopback_endpoint(srv), "loop-embed": loopback_embed_endpoint(srv)}
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": endpoints}))
        overlay = {
            "models_file": "models.yaml", "panel": ["loop"], "memory": NOTES,
            "roles": {**{r: "loop" for r in base_config()["roles"]}, "embedder": "loop-embed"},
            "history": {"envs": ["alfworld"], "splits": {"alfworld": "eval"}, "task_types": {"alfworld": None},
                        "tasks": {"alfworld": None}, "env_options": {"alfworld": {"root": str(root)}},
                        "conditions": ["raw"], "chat_conditions": [], "in_flight": 1,
                        "actor": {"max_actions": 6},
                        "continuation": {"conditions": ["memory-notes"], "chat_conditions": []},
                        "probe": {"enabled": False}},
            # the table holds these few games only: the studies that draw more are off
            "playbook": {"enabled": False}, "antipersist": {"enabled": False}, "calibrator": {"enabled": False},
        }
        (wf / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        target = "results/history/continuation/loop/alfworld/memory-notes.parquet"
        env = {"PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(EXAMPLE)])}
        out = run_snakemake(wf, "--configfile", "overlay.yaml", "--", target, env=env)
        assert out.returncode == 0, failure_text(out)
    res = wf / "results/history/continuation/loop/alfworld"
    notes = notes_of(read_snapshot(res / "memory-notes.memory.json"))
    assert len(notes) == 1 and served(pd.read_parquet(res / "memory-notes.steps.parquet"))[0] == ["note-0001"]
    assert_calls_recorded(notes, res / "memory-notes.calls.parquet")


# -- the registry ---------------------------------------------------------------------------

LACKING = '''
class Lacking:
    kind = "lacking"

    def __init__(self, context, k=1):
        self.k = k

    def frozen(self):
        return None

    async def update(self, client, episodes):
        pass

    def state(self):
        return {}

    def load(self, state):
        pass


class Complete(Lacking):
    def playbook(self):
        return []


class NoContext(Complete):
    def __init__(self, k=1):
        self.k = k


class SyncUpdate(Complete):
    def update(self, client, episodes):
        pass
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "user_mem.py").write_text(LACKING)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "user_mem", raising=False)


def _playbook(entry, systems=("memory-mine",)):
    from memtrials.studies.playbook.workflow import PlaybookWorkflow

    cfg = base_config()
    cfg["memory"] = {"mine": entry}
    cfg["playbook"]["systems"] = list(systems)
    cfg["playbook"]["envs"] = ["alfworld"]
    return build(PlaybookWorkflow, cfg)


@pytest.mark.parametrize("entry,systems,message", [
    ({"class": "notes_memory:NotesMemory", "options": {}}, ["memory-other"],
     r"config key playbook\.systems: 'memory-other' names no memory .*configured: memory-mine"),
    ({"class": "no_such_module:X", "options": {}}, None,
     r"config key memory\.mine\.class: module 'no_such_module' does not import \(ModuleNotFoundError.*PYTHONPATH"),
    ({"class": "notes_memory:Notes", "options": {}}, None,
     r"config key memory\.mine\.class: module 'notes_memory' has no class 'Notes' \(its classes: NotesMemory\)"),
    ({"class": "user_mem:Lacking", "options": {}}, None,
     r"config key memory\.mine\.class: Lacking lacks the method\(s\) playbook that the playbook study calls"),
    ({"class": "user_mem:SyncUpdate", "options": {}}, None, r"memory\.mine\.class: SyncUpdate\.update is not async"),
    ({"class": "user_mem:NoContext", "options": {}}, None,
     r"config key memory\.mine\.class: NoContext's constructor takes no `context` keyword"),
    ({"class": "notes_memory:NotesMemory", "options": {"k": 2, "size": 3}}, None,
     r"config key memory\.mine\.options: NotesMemory does not accept these options .*'size'.*takes: k, max_tokens"),
])
def test_the_registry_refuses_with_the_key_and_the_fix(example, user_module, entry, systems, message):
    with pytest.raises(ConfigError, match=message):
        _playbook(entry, systems or ["memory-mine"])


def test_a_memory_without_playbook_is_still_a_design_and_the_schema_checks_names(example, user_module):
    from memtrials.studies.antipersist.workflow import AntipersistWorkflow

    cfg = base_config()
    cfg["memory"] = {"mine": {"class": "user_mem:Lacking", "options": {"k": 2}}}
    cfg["antipersist"]["designs"] = ["react", "memory-mine"]
    wf = build(AntipersistWorkflow, cfg)
    model = cfg["panel"][0]
    assert wf.designs == ["react", "memory-mine"]
    assert wf.cell(model, "alfworld", "memory-mine")["memory"] == {"name": "mine", **cfg["memory"]["mine"]}
    assert "memory" not in wf.cell(model, "alfworld", "react")
    cfg["memory"] = {"Mine": {"class": "user_mem:Lacking", "options": {}}}
    with pytest.raises(ConfigError, match=r"key memory: 'Mine' does not match"):
        check_config(cfg)
    cfg["memory"] = {}
    cfg["antipersist"]["designs"] = ["memory-Mine"]
    with pytest.raises(ConfigError, match=r"key antipersist\.designs\.0: 'memory-Mine' does not match"):
        check_config(cfg)


def test_every_builtin_memory_has_the_interface_its_studies_call():
    playbook = {"ace", "dc", "lesson_log"}
    for name in BUILTIN:
        cls = memory_class(name)
        check_class(cls, PLAYBOOK if name in playbook else LIFECYCLE, "a study", f"builtin {name}")


def test_config_check_runs_the_shipped_overlay_and_names_the_file_and_key():
    overlay = EXAMPLE / "notes.yaml"  # docs/memory.md's commands
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(EXAMPLE)])}
    cmd = [sys.executable, "-m", "memtrials", "config", "check", "--configfile", str(overlay)]
    ok = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    env["PYTHONPATH"] = str(REPO / "src")  # the example's folder not on the path
    bad = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert re.search(r"notes\.yaml: config key memory\.notes\.class: module 'notes_memory' does not import", bad.stderr)
    assert yaml.safe_load(overlay.read_text())["memory"]["notes"]["class"] == NOTES["notes"]["class"]


def test_the_docs_page_walks_through_the_example_as_it_is():
    page = (REPO / "docs" / "memory.md").read_text()
    assert "```python\n" + (EXAMPLE / "notes_memory.py").read_text() + "```" in page
    assert "```yaml\n" + "\n".join(line for line in (EXAMPLE / "notes.yaml").read_text().splitlines()
                                   if not line.startswith("#")) + "\n```" in page
