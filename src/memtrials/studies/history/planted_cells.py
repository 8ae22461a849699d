"""The history study's known-answer cells: what of the config decides them, and their checks.

The planted agent (``history.planted.model``, an entry of ``provider: planted``) plays the
``history.planted.conditions`` on the planted world's ``test`` split, ``history.planted.
tasks_per_cell`` tasks drawn by ``history.seed`` (the same list in every condition), with the
study's actor (``history.actor``; shuffles drawn per step, :data:`PLANTED_SHUFFLE`): the same rollout rule, runner, client and report as the
panel's cells, beside them.  :mod:`.planted_truth` computes the truth from the entry's
declared numbers; :mod:`.planted_report` puts it beside the estimates.
"""

from __future__ import annotations

from typing import Any, Mapping

from memtrials.config import ConfigError

PLANTED_ENV = "planted"
PLANTED_SPLIT = "test"
PLANTED_SHUFFLE = "per_step"
"""The planted cells' shuffles: a fresh uniform permutation at each prompt, whatever
``history.shuffle`` says (the truth of the shuffle views assumes it)."""


def planted_cell(h: Mapping[str, Any], endpoint: Mapping[str, Any]) -> dict[str, Any]:
    """The config slice of a planted rollout cell (as :meth:`HistoryWorkflow.cell` for a real one)."""
    p = h["planted"]
    return {"seed": h["seed"], "tasks_per_cell": int(p["tasks_per_cell"]), "chat_tasks_per_cell": None,
            "split": PLANTED_SPLIT, "task_types": None, "env_options": {}, "actor": h["actor"],
            "in_flight": h["in_flight"], "endpoint": dict(endpoint), "shuffle": PLANTED_SHUFFLE}


def check_planted(h: Mapping[str, Any], registry: Mapping[str, Any], models_file: str) -> None:
    """Refuse, before any job, a planted block the truth cannot be computed for."""
    from memtrials.studies.history.planted_truth import CONDITIONS

    p = h["planted"]
    name = str(p["model"])
    ep = registry.get(name)
    if ep is None or ep.provider != "planted" or ep.planted is None:
        raise ConfigError(f"config key history.planted.model: {name!r} is not a planted endpoint of {models_file} "
                          "(provider: planted); name one (the default planted-history) or set "
                          "history.planted.enabled: false")
    bad = sorted(set(p["conditions"]) - set(CONDITIONS))
    if bad:
        raise ConfigError(f"config key history.planted.conditions: no declared planted effect for {bad}; "
                          f"allowed: {', '.join(CONDITIONS)}")
    if h["actor"]["max_listed_actions"] is not None and int(h["actor"]["max_listed_actions"]) < 5:
        raise ConfigError("config key history.actor.max_listed_actions: the planted world lists up to 5 actions "
                          "and its truth assumes every one is shown; set it to at least 5 (or null)")
