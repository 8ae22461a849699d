"""Shared pieces of the reliability drills (``benchmarks/drill_*.py``): a workflow copy in
a temporary folder (results, logs and ``.snakemake/`` land there, never in the
checkout), Snakemake in it, the loopback endpoint as a registry entry, each study's cells
run in-process, and the options the drills share.

Not a drill itself: ``python benchmarks/drill_common.py`` prints where a copy would go.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
PY = sys.executable
WORKFLOW_ITEMS = ("Snakefile", "profiles", "workflow", "config", "envs")
"""What a copy holds: ``profiles/`` too, since Snakemake loads ``profiles/default`` beside the
Snakefile into every run (``rerun-incomplete`` among its settings)."""


def workflow_copy(dest: Path | None = None, prefix: str = "memtrials-drill-") -> Path:
    """The workflow (Snakefile, profiles/, workflow/, config/, envs/; ``src`` linked) in a fresh folder."""
    dest = Path(dest) if dest else Path(tempfile.mkdtemp(prefix=prefix)) / "wf"
    dest.mkdir(parents=True, exist_ok=True)
    for item in WORKFLOW_ITEMS:
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / item)
    (dest / "src").symlink_to(REPO / "src")
    return dest


def env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a drill's child processes: the package importable, and no run id
    inherited from a calling Snakemake (each invocation gets its own)."""
    out = {k: v for k, v in os.environ.items() if k != "MEMTRIALS_RUN_ID"}
    out["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + out["PYTHONPATH"] if out.get("PYTHONPATH") else "")
    out.update(extra or {})
    return out


def snakemake_args(*args: str, cores: int = 2) -> list[str]:
    return [PY, "-m", "snakemake", "--cores", str(cores), *args]


def snakemake(wf: Path, *args: str, cores: int = 2, timeout: int = 3600,
              extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m snakemake --cores N ARGS`` in ``wf``, output captured."""
    return subprocess.run(snakemake_args(*args, cores=cores), cwd=wf, capture_output=True, text=True,
                          timeout=timeout, env=env(extra_env))


def roles(wf: Path) -> list[str]:
    """Every role of the config (so an overlay can put all of them on one endpoint)."""
    cfg = yaml.safe_load((wf / "config" / "config.yaml").read_text())
    return sorted(set(cfg.get("roles") or {}) | {"judge", "calibrator"})


def write_models(path: Path, endpoints: Mapping[str, Mapping[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"endpoints": {k: dict(v) for k, v in endpoints.items()}}, sort_keys=False))
    return path


def loopback_roles(wf: Path, name: str = "loop", embedder: str = "loopemb") -> dict[str, str]:
    """Every chat role on ``name``, the embedder on ``embedder`` (a ``task: embed`` entry)."""
    return {r: (embedder if r == "embedder" else name) for r in roles(wf)}


def loopback_overlay(srv: Any, wf: Path, file: str = "overlay.yaml", extra: dict[str, Any] | None = None,
                     **kw: Any) -> Path:
    """``models.yaml`` (:func:`loopback_registry`, given ``kw``) and the overlay ``file`` in ``wf``:
    the panel and every role on the loopback endpoint, plus the keys of ``extra``; returns the overlay."""
    loopback_registry(srv, wf / "models.yaml", **kw)
    overlay = wf / file
    overlay.write_text(yaml.safe_dump({"models_file": "models.yaml", "panel": ["loop"], "roles": loopback_roles(wf),
                                       **(extra or {})}))
    return overlay


class Checks:
    """A drill's checks: each printed as it is made, the failed ones kept for the figure."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.fig: dict[str, str] = {}

    def __call__(self, ok: bool, what: str) -> None:
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            self.failures.append(what)

    def figure(self, head: str) -> int:
        """Print the figure line (``head``, then ``fig`` and the failed count) last; the exit status."""
        self.fig["failed_checks"] = str(len(self.failures))
        print(" ".join([head, *(f"{k}={v}" for k, v in self.fig.items()), f"ok={'no' if self.failures else 'yes'}"]))
        return 1 if self.failures else 0


def loopback_registry(srv: Any, path: Path, name: str = "loop", embedder: str = "loopemb", **kw: Any) -> Path:
    """A registry with the chat entry ``name`` and the embedding entry ``embedder``, both on ``srv``."""
    from memtrials.testing import loopback_embed_endpoint, loopback_endpoint

    emb_kw = {k: v for k, v in kw.items() if k == "api_key_env"}
    return write_models(path, {name: loopback_endpoint(srv, **kw), embedder: loopback_embed_endpoint(srv, **emb_kw)})


if __name__ == "__main__":
    print(Path(tempfile.gettempdir()) / "memtrials-drill-*")


# -- study cells driven directly (the functions the rules call) ------------------------
def cell_config(tmp: Path, models_file: Path, *, max_retries: int = 8, timeout_s: float = 5.0,
                tasks_per_cell: int = 2, max_actions: int = 4) -> dict[str, Any]:
    """The default config with every role on the loopback registry ``models_file``, the
    cache under ``tmp``, fast retries, and a small ScienceWorld history cell."""
    import copy

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg["models_file"] = str(models_file)
    cfg["panel"] = ["loop"]
    cfg["roles"] = {r: ("loopemb" if r == "embedder" else "loop") for r in cfg["roles"]}
    cfg["cache"] = {"path": str(tmp / "results" / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"}
    cfg["request"] = {"timeout_s": timeout_s, "max_retries": max_retries, "backoff_base_s": 0.01,
                      "backoff_max_s": 0.1}
    cfg["history"] = copy.deepcopy(cfg["history"])
    cfg["history"].update({"tasks_per_cell": tasks_per_cell, "in_flight": 2, "envs": ["scienceworld"]})
    cfg["history"]["actor"]["max_actions"] = max_actions
    return cfg


HISTORY_TASKS = [("find-non-living-thing:0", "find-non-living-thing"),
                 ("lifespan-longest-lived:0", "lifespan-longest-lived"),
                 ("identify-life-stages-1:0", "identify-life-stages-1")]


def luck_cells(cfg: Mapping[str, Any], out: Path) -> dict[str, Path]:
    """The luck study's worlds, freeze, writer cell and reader cell (JSON answers) for the
    endpoint ``loop`` into ``out``; returns the Parquet files by name."""
    import asyncio

    from memtrials.config import check_config
    from memtrials.studies.luck import entry
    from memtrials.studies.luck.workflow import LuckWorkflow

    models = check_config(cfg)
    lw = LuckWorkflow(cfg, models, lambda m: {"identity": models[m].identity, "params": dict(models[m].params),
                                              "structured_output": models[m].structured_output})
    out.mkdir(parents=True, exist_ok=True)
    prompts = str(REPO / lw.prompts_dir)
    worlds, reg = out / "worlds.parquet", out / "freeze" / "registered.json"
    entry.make_worlds(**lw.worlds(), out=str(worlds))
    common = dict(worlds=str(worlds), prompts_dir=prompts, config_slice=lw.slice(), registered=str(reg))
    entry.freeze(**common, out=str(out / "freeze" / "manifest.json"))
    files = {"lessons": out / "lessons.parquet", "lessons.calls": out / "lessons.calls.parquet",
             "answers": out / "answers.parquet", "answers.calls": out / "answers.calls.parquet"}
    asyncio.run(entry.writers(config=cfg, model="loop", max_tokens=lw.max_tokens("writer"), out=str(files["lessons"]),
                              calls=str(files["lessons.calls"]), **common))
    asyncio.run(entry.readers(config=cfg, model="loop", lessons=str(files["lessons"]),
                              max_tokens=lw.max_tokens("reader"), out=str(files["answers"]),
                              calls=str(files["answers.calls"]), **common))
    return files


def history_cells(cfg: Mapping[str, Any], out: Path, conditions: tuple[str, ...] = ("raw", "experience")
                  ) -> dict[str, Path]:
    """History rollout cells on real ScienceWorld for the endpoint ``loop`` into ``out``."""
    import asyncio

    from memtrials.config import check_config
    from memtrials.envs.tasks import make_table
    from memtrials.studies.history import entry
    from memtrials.studies.history.workflow import HistoryWorkflow

    models = check_config(cfg)
    hw = HistoryWorkflow(cfg, models, lambda m: {"identity": models[m].identity, "params": dict(models[m].params),
                                                 "structured_output": models[m].structured_output})
    out.mkdir(parents=True, exist_ok=True)
    tasks = out / "tasks.parquet"
    rows = [{"task_id": t, "split": "test", "type": typ, "source": "official"} for t, typ in HISTORY_TASKS]
    make_table("scienceworld", rows).to_parquet(tasks, index=False)
    prompts = str(REPO / "config" / "prompts" / "actor")
    files: dict[str, Path] = {}
    for cond in conditions:
        stem = out / f"rollouts.{cond}"
        asyncio.run(entry.rollouts(cfg, "loop", "scienceworld", cond, hw.cell("loop", "scienceworld"), prompts,
                                     str(tasks), f"{stem}.parquet", f"{stem}.steps.parquet", f"{stem}.calls.parquet"))
        for part in ("", ".steps", ".calls"):
            files[f"{cond}{part}"] = Path(f"{stem}{part}.parquet")
    return files


def playbook_cells(cfg: Mapping[str, Any], out: Path, variants: tuple[str, ...] = ("ace-passfail", "dc")
                   ) -> dict[str, Path]:
    """The playbook study's growth and practice cells (ACE and Dynamic Cheatsheet) on a few
    generated ALFWorld games for the endpoint ``loop`` into ``out``; returns each cell's files
    (``<variant>.<part>.steps`` / ``.calls`` / ``.record``)."""
    import asyncio
    import copy

    from memtrials.config import check_config
    from memtrials.envs.alfworld import env as alfworld
    from memtrials.envs.alfworld.gen import generate
    from memtrials.envs.tasks import make_table, write_table
    from memtrials.studies.playbook.growth import growth_run
    from memtrials.studies.playbook.practice import practice_run
    from memtrials.studies.playbook.workflow import PlaybookWorkflow

    root = out / "games"
    generate(root, seed=0, sizes={"train": 2, "practice": 2}, workers=1)
    tasks = out / "tasks.parquet"
    write_table(make_table("alfworld", alfworld.task_rows(root)), tasks)
    cfg = copy.deepcopy(dict(cfg))
    pb = cfg["playbook"]
    pb.update(envs=["alfworld"], env_options={"alfworld": {"root": str(root)}}, in_flight=1)
    pb["actor"] = {**pb["actor"], "max_actions": 2}
    pb["growth"].update(runs=1, train_tasks=2, batch_size=2, max_passes=1)
    pb["measurement"].update(blocks=2, practice_tasks=2, episodes=4)
    models = check_config(cfg)
    wf = PlaybookWorkflow(cfg, models, lambda m: models[m].cell_params())
    files: dict[str, Path] = {}
    for variant in variants:
        base = out / variant
        common = dict(model="loop", env="alfworld", variant=variant, growth="std", tasks_path=str(tasks),
                      actor_prompts_dir=str(REPO / pb["actor_prompts_dir"]), make_env=None, run=1)
        stems = {part: base / part for part in ("growth", "practice")}
        outs = {part: {"out_episodes": f"{s}.parquet", "out_steps": f"{s}.steps.parquet",
                       "out_calls": f"{s}.calls.parquet", "out_record": f"{s}.json"} for part, s in stems.items()}
        outs["growth"]["out_playbooks"] = f"{stems['growth']}.playbooks.parquet"
        outs["practice"].update(out_blocks=f"{stems['practice']}.blocks.parquet",
                                out_design=f"{stems['practice']}.design.parquet",
                                out_estimates=f"{stems['practice']}.estimates.parquet")
        base.mkdir(parents=True, exist_ok=True)
        asyncio.run(growth_run(cfg, prompts_dir=str(REPO / pb["memory_prompts_dir"]),
                               cell=wf.cell("growth", "loop", "alfworld"), **common, **outs["growth"]))
        asyncio.run(practice_run(cfg, playbooks_path=outs["growth"]["out_playbooks"],
                                 cell=wf.cell("practice", "loop", "alfworld"), **common, **outs["practice"]))
        for part in ("growth", "practice"):
            for kind in ("steps", "calls", "record"):
                files[f"{variant}.{part}.{kind}"] = Path(outs[part][f"out_{kind}"])
        files[f"{variant}.growth.playbooks"] = Path(outs["growth"]["out_playbooks"])
    return files


def antipersist_cells(cfg: Mapping[str, Any], out: Path,
                      designs: tuple[str, ...] = ("expel", "autorefine", "abstraction", "reflexion")
                      ) -> dict[str, Path]:
    """Anti-persistence training streams (two rounds of two ScienceWorld tasks) and their frozen
    evaluation for the endpoint ``loop`` into ``out``; returns each design's files
    (``<design>.steps`` / ``.calls`` / ``.memory``, and ``<design>.eval.*``)."""
    import asyncio
    import copy

    import pandas as pd

    from memtrials.studies.antipersist.evaluate import evaluate
    from memtrials.studies.antipersist.train import train_stream

    out.mkdir(parents=True, exist_ok=True)
    tasks = out / "tasks.parquet"
    pd.DataFrame([{"task_id": f"{typ}:{v}", "env": "scienceworld", "split": "train" if v == 0 else "test", "type": typ,
                   "source": "official", "detail": "{}"} for _, typ in HISTORY_TASKS for v in range(3)]).to_parquet(tasks)
    a = cfg["antipersist"]
    cell = {"seed": 7, "rounds": 2, "round_size": 2, "batch_size": 1, "in_flight": 1, "k": 3,
            "pools": {"scienceworld": {"train_split": "train", "train_tasks": 3, "eval_split": "test", "eval_tasks": 2}},
            "env_options": {"scienceworld": {}}, "actor": {"mode": "choice", "max_actions": 2, "max_output_tokens": 64,
                                                            "max_listed_actions": 5},
            "synthesis": {"max_tokens": 64}, "synthesizer": None, "embedder": "loopemb",
            **{key: copy.deepcopy(a[key]) for key in ("selector", "reflexion", "expel", "autorefine")}}
    files: dict[str, Path] = {}
    for design in designs:
        d = out / design
        d.mkdir(parents=True, exist_ok=True)
        common = dict(model="loop", env="scienceworld", design=design, seed_index=1, cell=cell,
                      prompts_dir=str(REPO / "config/prompts/memory"),
                      actor_prompts_dir=str(REPO / "config/prompts/actor"), tasks_path=str(tasks))
        asyncio.run(train_stream(cfg, **common, out_episodes=str(d / "train.parquet"),
                                 out_steps=str(d / "train.steps.parquet"), out_calls=str(d / "train.calls.parquet"),
                                 out_memory=str(d / "memory.json"), out_rounds=str(d / "rounds.json")))
        asyncio.run(evaluate(cfg, **common, memory_path=str(d / "memory.json"), out_episodes=str(d / "eval.parquet"),
                             out_steps=str(d / "eval.steps.parquet"), out_calls=str(d / "eval.calls.parquet"),
                             out_record=str(d / "eval.json")))
        files.update({f"{design}.steps": d / "train.steps.parquet", f"{design}.calls": d / "train.calls.parquet",
                      f"{design}.memory": d / "memory.json", f"{design}.eval.steps": d / "eval.steps.parquet",
                      f"{design}.eval.calls": d / "eval.calls.parquet"})
    return files


# the cells each drill can run, by study: ``STUDY_CELLS[name](cfg, out)`` -> that study's files
STUDY_CELLS = {"luck": luck_cells, "history": history_cells, "playbook": playbook_cells,
               "antipersist": antipersist_cells}
STUDIES = tuple(STUDY_CELLS)


def drill_parser(doc: str) -> argparse.ArgumentParser:
    """A drill's argument parser, described by the first paragraph of its docstring ``doc``."""
    return argparse.ArgumentParser(description=doc.split("\n\n")[0])


def cell_drill_arguments(ap: argparse.ArgumentParser, seed: int) -> None:
    """The options of a drill that runs every study's cells in-process (:data:`STUDY_CELLS`)."""
    ap.add_argument("--tasks", type=int, default=2, help="ScienceWorld tasks per history cell")
    ap.add_argument("--steps", type=int, default=4, help="actions per episode")
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--studies", nargs="+", default=list(STUDIES), choices=list(STUDIES),
                    help="which studies' cells to run (default: all four)")


def workflow_drill_arguments(doc: str, argv: list[str] | None, quick: str) -> argparse.Namespace:
    """The options of a drill on a workflow copy: ``--quick`` (what it then does: ``quick``)
    and ``--keep``, parsed from ``argv``."""
    ap = drill_parser(doc)
    ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--keep", action="store_true", help="keep the temporary workflow copy")
    return ap.parse_args(argv)
