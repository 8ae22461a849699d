"""The config of the anti-persistence study's known-answer run (:mod:`.known_answer`): env ``planted``,
the planted model, the known-answer designs and sizes, every round evaluated.
Kept apart from :mod:`.known_answer` so the study's workflow helper can slice it without an import cycle."""

from __future__ import annotations

import copy
from typing import Any, Mapping

ENV = "planted"


def known_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with the study's section derived from its ``known_answer`` block (module docstring)."""
    cfg = copy.deepcopy(dict(config))
    a = cfg["antipersist"]
    ka = a["known_answer"]
    a.update(models=[ka["model"]], envs=[ENV], designs=list(ka["designs"]), seeds=int(ka["seeds"]),
             rounds=int(ka["rounds"]), round_size=int(ka["round_size"]), batch_size=int(ka["batch_size"]),
             eval_every_round=True, in_flight=int(ka["in_flight"]), k=int(ka["k"]), synthesizer=None,
             actor={**a["actor"], **ka["actor"]})
    a["pools"] = {**a["pools"], ENV: dict(ka["pool"])}
    a["sweeps"] = {**a["sweeps"], "enabled": False}
    cfg["roles"] = {**cfg["roles"], "embedder": ka["embedder"]}
    return cfg
