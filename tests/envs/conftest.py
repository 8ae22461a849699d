"""Shared engines for the environment tests: one JVM / one game set per session (they are slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMALL_SIZES = {"train": 4, "practice": 1, "eval": 1}  # one game of each of the six task types, every split


@pytest.fixture(scope="session")
def sw_env():
    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    env = ScienceWorldEnv()
    yield env
    env.close()


@pytest.fixture(scope="session")
def alf_games(tmp_path_factory):
    """A small generated ALFWorld game set: (root, records)."""
    from memtrials.envs.alfworld.gen import generate

    root = tmp_path_factory.mktemp("alfworld") / "games"
    records = generate(root, seed=0, sizes=SMALL_SIZES, workers=2)
    return root, records


@pytest.fixture(scope="session")
def alf_env(alf_games):
    from memtrials.envs.alfworld.env import AlfworldEnv

    env = AlfworldEnv(root=alf_games[0])
    yield env
    env.close()


def random_prefix(env, task_id: str, n: int, seed: int = 0, avoid: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """Play ``n`` uniformly random admissible actions (none starting with ``avoid``);
    return (replay actions, observations)."""
    import random

    rng = random.Random(seed)
    env.reset(task_id)
    actions, texts = [], []
    for _ in range(n):
        action = rng.choice(sorted(a for a in env.admissible_actions() if not a.startswith(avoid) or not avoid))
        obs = env.step(action)
        actions.append(str(obs.info.get("replay_action", action)))
        texts.append(obs.text)
        if obs.done:
            break
    return actions, texts


def restore_in_fresh_process(name: str, options: dict, task_id: str, actions, texts, tmp_path: Path) -> str:
    """Run ``make_env(name, **options).restore(...)`` in a new Python process; return its last observation."""
    spec = tmp_path / "restore.json"
    spec.write_text(json.dumps({"name": name, "options": options, "task_id": task_id,
                                "actions": list(actions), "expected": list(texts)}))
    code = (
        "import json,sys\n"
        "from memtrials.envs import make_env\n"
        "s=json.load(open(sys.argv[1]))\n"
        "env=make_env(s['name'],**s['options'])\n"
        "obs=env.restore(s['task_id'],s['actions'],s['expected'])\n"
        "env.close()\n"
        "print('RESTORED:'+json.dumps(obs.text))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESTORED:")][-1]
    return json.loads(line[len("RESTORED:"):])
