"""Shared pieces of the reliability drills (``benchmarks/drill_*.py``): a workflow copy in
a temporary folder (results, logs and ``.snakemake/`` land there, never in the
checkout), Snakemake in it, and the loopback endpoint as a registry entry.

Not a drill itself: ``python benchmarks/drill_common.py`` prints where a copy would go.
"""

from __future__ import annotations

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
WORKFLOW_ITEMS = ("Snakefile", "workflow", "config", "envs")


def workflow_copy(dest: Path | None = None, prefix: str = "hindsight-drill-") -> Path:
    """The workflow (Snakefile, workflow/, config/, envs/; ``src`` linked) in a fresh folder."""
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
    out = {k: v for k, v in os.environ.items() if k != "HINDSIGHT_RUN_ID"}
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


def loopback_registry(srv: Any, path: Path, name: str = "loop", embedder: str = "loopemb", **kw: Any) -> Path:
    """A registry with the chat entry ``name`` and the embedding entry ``embedder``, both on ``srv``."""
    from hindsight.testing import loopback_embed_endpoint, loopback_endpoint

    emb_kw = {k: v for k, v in kw.items() if k == "api_key_env"}
    return write_models(path, {name: loopback_endpoint(srv, **kw), embedder: loopback_embed_endpoint(srv, **emb_kw)})


if __name__ == "__main__":
    print(Path(tempfile.gettempdir()) / "hindsight-drill-*")
