"""The config of the playbook study's known-answer setting (:mod:`.known_answer`): env ``planted``, the
planted model as actor, Reflector and Curator, ACE with pass/fail feedback, no baselines, the known-answer sizes.
Kept apart from :mod:`.known_answer` so the study's workflow helper can slice it without an import cycle."""

from __future__ import annotations

import copy
from typing import Any, Mapping

ENV = "planted"
VARIANT = "ace-passfail"


def known_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config of the known-answer setting (module docstring)."""
    cfg = copy.deepcopy(dict(config))
    pb = cfg["playbook"]
    ka = pb["known_answer"]
    model = ka["model"]
    for part in ("growth", "measurement", "choice", "evaluation"):
        pb[part].update(ka[part])
    pb.update(seed=int(ka["seed"]), models=[model], envs=[ENV], systems=["ace"], exclude=[], roles_from_model=True, long_growth=False,
              in_flight=int(ka["in_flight"]), tokenizer="pieces", actor={**pb["actor"], **ka["actor"]}, actor_env={})
    pb["baselines"].update(methods=[], envs=[ENV], runs=ka["cut_runs"], subsampled_settings=None)
    pb["diagnostics"]["enabled"] = False
    cfg["roles"] = {**cfg["roles"], "embedder": ka["embedder"]}
    return cfg
