"""What the environment rules run (``workflow/rules/envs.smk``); scripts only pass ``snakemake.*`` on.

The ``envs:`` config section (validated by ``config/schemas/config.schema.json``):
``run`` (environments whose tables and checks ``all`` builds), ``seed``, per-environment
``source`` (``generated`` or ``official``), AppWorld ``verify``/``verify_sample``, ALFWorld
``sizes``/``workers``, ScienceWorld ``simplification``, WebShop ``root``, the planted world's
``sizes``, and ``check``
(``per_split``, ``random_steps``, ``gold_min_success``).
Every key is required (``config/config.yaml`` holds the defaults); a rule passes the
slice it needs (``seed`` and the sections named), and this module reads it without a
second default.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

ALFWORLD_GAMES = "resources/alfworld/games"
APPWORLD_ROOT = "resources/appworld"
WEBSHOP_SETUP = "resources/webshop/setup.json"


def env_options(envs_cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The ``make_env`` options implied by the ``envs:`` config of environment ``name``."""
    if name == "scienceworld":
        return {"simplification": envs_cfg[name]["simplification"]}
    if name == "alfworld":
        return {"official": True} if _official(envs_cfg, name) else {"root": ALFWORLD_GAMES}
    if name == "appworld":
        return {"official": True} if _official(envs_cfg, name) else {"root": APPWORLD_ROOT}
    if name == "webshop":
        root = envs_cfg[name]["root"]
        return {} if root is None else {"root": str(root)}
    if name == "planted":
        return {}
    raise ValueError(f"envs: unknown environment {name!r}")


def _official(envs_cfg: Mapping[str, Any], name: str) -> bool:
    return envs_cfg[name]["source"] == "official"


OFFICIAL_VARIABLES = {"alfworld": "ALFWORLD_DATA", "appworld": "APPWORLD_ROOT"}
"""The environment variable naming each official data folder."""


def task_table_params(envs_cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The ``envs:`` slice a task table of ``name`` is built from (``seed`` and its section) and, for
    an official source, ``official_data``: the folder its variable points at (resolved; ``None``
    when unset), so that pointing ``ALFWORLD_DATA`` / ``APPWORLD_ROOT`` elsewhere rebuilds the table
    (Snakemake reruns a job whose params changed).  A generated source's slice has no such key, so
    its params are what they were before the key existed."""
    out: dict[str, Any] = {k: envs_cfg[k] for k in ("seed", name)}
    if name in OFFICIAL_VARIABLES and _official(envs_cfg, name):
        value = os.environ.get(OFFICIAL_VARIABLES[name])
        out["official_data"] = str(Path(value).resolve()) if value else None
    return out


def env_data_inputs(envs_cfg: Mapping[str, Any], name: str) -> list[str]:
    """The generated data a task table of ``name`` depends on (none for official sources;
    WebShop's set-up record: its shipped data verified, its index built)."""
    if name == "webshop":
        return [WEBSHOP_SETUP]
    if name not in ("alfworld", "appworld") or _official(envs_cfg, name):
        return []
    return {"alfworld": ["resources/alfworld/games.parquet"],
            "appworld": ["resources/appworld/tasks.parquet"]}[name]


def webshop_data_files(envs_cfg: Mapping[str, Any]) -> list[str]:
    """The WebShop data files the set-up step verifies (``envs.webshop.root`` or ``data/webshop``):
    its ``SHA256SUMS`` and the compressed files it lists."""
    from memtrials.envs.webshop.data import REQUIRED, SUMS_FILE

    root = envs_cfg["webshop"]["root"]
    folder = Path(root) if root is not None else Path("data/webshop")
    return [str(folder / SUMS_FILE)] + [str(folder / f"{name}.xz") for name in REQUIRED]


def generate_alfworld(envs_cfg: Mapping[str, Any], out_dir: str, manifest: str, workers: int = 1) -> None:
    """Generate the offline ALFWorld games into ``out_dir`` (atomically) and their manifest."""
    from memtrials.envs.alfworld.gen import generate, records_to_rows
    from memtrials.envs.tasks import make_table, write_table

    sizes = {k: int(v) for k, v in envs_cfg["alfworld"]["sizes"].items()}
    tmp = Path(out_dir).with_name(Path(out_dir).name + ".tmp")
    results = generate(tmp, int(envs_cfg["seed"]), sizes, workers=workers)
    if Path(out_dir).exists():
        import shutil

        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    write_table(make_table("alfworld", records_to_rows(results)), manifest)
    log.info("alfworld: %d games in %s", len(results), out_dir)


def build_task_table(name: str, envs_cfg: Mapping[str, Any]) -> pd.DataFrame:
    """The task table of environment ``name`` under the ``envs:`` config."""
    from memtrials.envs.tasks import make_table

    opts = env_options(envs_cfg, name)
    if name == "scienceworld":
        from memtrials.envs.scienceworld.env import ScienceWorldEnv
        from memtrials.envs.scienceworld.tasks import task_rows

        env = ScienceWorldEnv(**opts)
        try:
            return make_table(name, task_rows(env))
        finally:
            env.close()
    if name == "alfworld":
        from memtrials.envs.alfworld.env import official_help, official_root, task_rows

        if opts.get("official"):
            root = official_root()
            if root is None:
                raise FileNotFoundError(official_help())
            return make_table(name, task_rows(root, official=True))
        return make_table(name, task_rows(opts["root"]))
    if name == "appworld":
        from memtrials.envs.appworld.env import task_rows

        return make_table(name, task_rows(root=opts.get("root"), official=bool(opts.get("official"))))
    if name == "webshop":
        from memtrials.envs.webshop.splits import task_rows as webshop_rows

        return make_table(name, webshop_rows(opts.get("root")))
    if name == "planted":
        from memtrials.envs.planted.splits import task_rows as planted_rows

        return make_table(name, planted_rows(envs_cfg["planted"]["sizes"]))
    raise ValueError(f"envs: unknown environment {name!r}")


def run_envcheck(name: str, envs_cfg: Mapping[str, Any], tasks_path: str) -> pd.DataFrame:
    """Play gold and random agents on the configured sample; raise if gold falls short."""
    from memtrials.envs import load_tasks, make_env
    from memtrials.envs.check import require_gold, run_check, success_rates

    chk = envs_cfg["check"]
    tasks = winnable(load_tasks(name, tasks_path))
    env = make_env(name, **env_options(envs_cfg, name))
    try:
        df = run_check(env, tasks, int(chk["per_split"]), int(envs_cfg["seed"]), int(chk["random_steps"]))
    finally:
        env.close()
    log.info("envcheck %s: success %s", name, success_rates(df))
    require_gold(df, float(chk["gold_min_success"]))
    return df


def winnable(tasks: pd.DataFrame) -> pd.DataFrame:
    """The tasks whose ``detail`` does not flag them ``capped`` (WebShop goals whose exact
    purchase scores below 1.0: no agent can win them, so the gold check leaves them out)."""
    from memtrials.envs.tasks import detail

    keep = [detail(row).get("capped") is not True for _, row in tasks.iterrows()]
    return tasks[keep]


def setup_webshop(envs_cfg: Mapping[str, Any], out: str) -> dict[str, Any]:
    """WebShop's set-up step: verify the data (SHA-256 of every file; ``envs.webshop.root``, or
    the shipped ``data/webshop``) and build the search index, timed; the record (digests,
    documents, seconds) is written to ``out``."""
    import time

    from memtrials.envs.webshop import data
    from memtrials.envs.webshop.env import shop
    from memtrials.io import atomic_write_json

    t0 = time.perf_counter()
    root = env_options(envs_cfg, "webshop").get("root")
    digests = data.verify(root)
    t1 = time.perf_counter()
    catalog, engine = shop(root)
    t2 = time.perf_counter()
    record = {"digests": digests, "products": len(catalog.products), "goals": len(catalog.goals),
              "indexed": len(engine.doc_ids), "verify_s": round(t1 - t0, 3), "index_s": round(t2 - t1, 3)}
    atomic_write_json(out, record)
    log.info("webshop: data verified in %.1f s, %d products indexed in %.1f s", t1 - t0, record["indexed"], t2 - t1)
    return record


def build_appworld(envs_cfg: Mapping[str, Any], data_dir: str, manifest: str, workers: int = 1,
                   verified: str | None = None) -> None:
    """Build the offline AppWorld data root (``<root>/data``) atomically, and its task manifest.

    With ``envs.appworld.verify: manifest`` AppWorld's evaluator (in ``workers`` processes)
    verifies the tasks the verification manifest ``verified`` does not cover and
    ``envs.appworld.verify_sample`` tasks per split (:mod:`memtrials.envs.appworld.manifest`);
    with ``all`` it verifies every task."""
    import shutil

    from memtrials.envs.appworld.data import build
    from memtrials.envs.appworld.manifest import load_manifest
    from memtrials.envs.tasks import make_table, write_table

    aw = envs_cfg["appworld"]
    known = load_manifest(verified) if aw["verify"] == "manifest" and verified else None
    data = Path(data_dir)
    tmp_root = data.parent.with_name(data.parent.name + ".tmp")
    if tmp_root.exists():
        shutil.rmtree(tmp_root)
    rows = build(tmp_root, seed=int(envs_cfg["seed"]), workers=workers, verified=known,
                 sample=int(aw["verify_sample"]))
    if data.exists():
        shutil.rmtree(data)
    data.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp_root / "data", data)
    shutil.rmtree(tmp_root, ignore_errors=True)
    write_table(make_table("appworld", rows), manifest)
    log.info("appworld: %d tasks in %s (%d verified by AppWorld's evaluator in this build, the others by %s)",
             len(rows), data, sum(r["verified_by"] == "evaluator" for r in rows), verified)
