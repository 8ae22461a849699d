"""The study's environment constructor: on AppWorld each environment object writes its own
experiment folder, so two episodes on the same task at once (two jobs of a run, or two
candidates' episodes in one job) no longer share ``tasks/<id>/evaluation`` (a FileNotFoundError
in a default run with the one shared name)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hindsight.studies.playbook.play import env_maker


def test_two_appworld_objects_play_the_same_task_at_once_in_their_own_folders(aw_root):
    task = sorted(p.name for p in (aw_root / "data" / "tasks").iterdir())[0]
    make = env_maker("appworld", {"root": str(aw_root), "max_steps": 1})
    envs = [make(), make()]
    try:
        for e in envs:
            e.reset(task)
        with ThreadPoolExecutor(2) as pool:  # the one step is the cap: both evaluate at once
            obs = list(pool.map(lambda e: e.step("print('hello')"), envs))
        assert all(o.done for o in obs)
        outputs = sorted(p.name for p in (aw_root / "experiments" / "outputs").iterdir() if p.name != "hindsight")
        assert len(outputs) == 2 and all((aw_root / "experiments/outputs" / n / "tasks" / task).is_dir() for n in outputs)
    finally:
        for e in envs:
            e.close()
