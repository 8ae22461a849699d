"""What the calibrator study's design asks of its endpoints before any call (``python -m
memtrials estimate``), as :class:`memtrials.pipeline.workload.Work` rows: the Raw source
rollouts, the generator's reviews, the screen and the paired comparisons of each decision
context, the Calibrator rollouts (Table 8, the
ablation's own cells of Table 9) and the joint-actor rollouts.

Its rollout cells are played by the history study's rollout code (cell ids
``history/rollouts/<model>/<env>/calibrator...``), so their figures are measured under
``history/calibrator-rollouts``.  The fine-tunes (``calibrator_sft``) call no endpoint and
are not counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtrials.pipeline.workload import ANY, Work

if TYPE_CHECKING:
    from memtrials.studies.history.calibrator.workflow import CalibratorWorkflow

ROLLOUTS = "history/calibrator-rollouts"


def workload(study: CalibratorWorkflow) -> list[Work]:
    """The rows of ``study`` (none when disabled or without sources)."""
    if not (study.enabled and study.sources and study.envs):
        return []
    h, c = study.h, study.c
    steps, flight = int(h["actor"]["max_actions"]), int(h["in_flight"])
    contexts = int(c["contexts"]["count"])
    out: list[Work] = []

    def rollouts(model: str, episodes: int, reviewer: str | None, part: str) -> None:
        out.append(Work(part, model, "actor", units=episodes, steps=steps, jobs=1, episodes=episodes,
                        in_flight=flight, profile=ROLLOUTS))
        if reviewer:
            out.append(Work(part, reviewer, "review", units=episodes, steps=steps, profile=ROLLOUTS))

    per_source = int(c["sources"]["tasks_per_cell"])
    for m in study.sources:
        for _env in study.envs:
            rollouts(m, per_source, None, "sources")
    out.append(Work("generate", str(study.generator), ANY, units=contexts, jobs=1))
    out.append(Work("screen", str(study.judge), "calibrator-screen", units=contexts, jobs=1))
    for m in study.recipients:
        out.append(Work("compare", m, "calibrator-pair", units=2 * contexts, jobs=1))
        out.append(Work("compare", str(study.judge), "calibrator-compare", units=contexts))
    if study.rollouts_enabled:
        tasks = int(h["tasks_per_cell"])
        cals = [study.roles.get("calibrator"), *study.trained_cals]
        for reviewer in cals:
            for m in study.history_models:
                for _env in study.rollout_envs:
                    rollouts(m, tasks, str(reviewer), "rollouts")
        if study.ablation_enabled:
            for v, who in study.ablation_endpoints.items():
                if who not in cals:
                    for m in study.history_models:
                        for _env in study.rollout_envs:
                            rollouts(m, tasks, str(who), "ablation")
        if study.joint_enabled:
            for m in study.joint_data_models:
                for _env in study.rollout_envs:
                    rollouts(m, tasks, str(study.roles.get("calibrator")), "joint-sources")
            for arm, actors in study.joint_actors.items():
                for m in actors:
                    for _env in study.rollout_envs:
                        out.append(Work("joint", m, "actor", units=tasks, steps=steps, jobs=1, episodes=tasks,
                                        in_flight=flight))
    return out
