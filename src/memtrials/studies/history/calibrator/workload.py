"""What the calibrator study's design asks of its endpoints before any call (``python -m
memtrials estimate``), as :class:`memtrials.pipeline.workload.Work` rows: the Raw source
rollouts, the generator's reviews, the screen and the paired comparisons of each decision
context, the Calibrator rollouts (Table 8, the
ablation's own cells of Table 9) and the joint-actor rollouts.

Its rollout cells are played by the history study's rollout code (cell ids
``history/rollouts/<model>/<env>/calibrator...``), so their figures are measured under
``history/calibrator-rollouts``.  The fine-tunes (``calibrator_sft``) call no endpoint and
are not counted.

The paired comparisons (``calibrator-pair``, ``calibrator-compare``) are made only for
candidates that pass the screen, which none of the embedded model's did in the measured run:
:func:`design_figures` gives their figures from the design and the measured stages before them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from memtrials.pipeline.workload import ANY, Profile, Work

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
    for m in study.recipients:  # at the cap every context's candidate passes the screen and its two actions differ
        out.append(Work("compare", m, "calibrator-pair", units=2 * contexts, jobs=1))
        out.append(Work("compare", str(study.judge), "calibrator-compare", units=2 * contexts))
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


def design_figures(study: CalibratorWorkflow, measured: Mapping[str, Any]) -> dict[str, Profile]:
    """Figures of the paired comparisons where ``measured`` lacks them, from the design (Stage 4,
    :mod:`.compare`) and the measured stages it follows:

    - calls: per context at most 2 recipient calls (without and with the candidate) and 2 judge
      calls (both orders): the measured share of contexts whose review reached the screen
      (``calibrator/screen/calibrator-screen``'s calls per context), every one assumed to pass
      the screen and, for the judge, to differ (an upper bound);
    - a recipient call's prompt: the actor's prompt at a decision context, the measured Calibrator
      rollouts' actor prompt (``history/calibrator-rollouts/actor``, the contexts are their steps),
      half of them with the generated experience (the review's measured answer); its output: the
      actor's measured answer;
    - a judge call's prompt: the longer of that actor prompt and the screen's measured prompt (the
      judge's template over a context), plus the two actions; its output: the screen's measured
      answer (a verdict of the same judge, within ``calibrator.review_max_tokens``)."""
    actor, screen = measured.get(f"{ROLLOUTS}/actor"), measured.get("calibrator/screen/calibrator-screen")
    review = measured.get("calibrator/generate/review")
    if actor is None or screen is None or review is None:
        return {}
    share = min(1.0, screen.calls_per_unit)  # screened contexts per context
    at = max(0.0, actor.prompt_base + actor.prompt_per_step * (actor.mean_step - 1.0))
    pair = Profile(calls_per_unit=share, prompt_base=at + review.completion / 2.0, prompt_per_step=0.0,
                   completion=actor.completion, prefix_share=actor.prefix_share, latency_s=actor.latency_s, calls=0,
                   source="design", basis=f"2 calls a screened context ({share:.2f} of contexts, all passing); "
                                          f"prompt: {ROLLOUTS}/actor's + half the review's answer")
    cap = study.c["review_max_tokens"]
    compare = Profile(calls_per_unit=share, prompt_base=max(at, screen.prompt_base) + 2.0 * actor.completion,
                      prompt_per_step=0.0,
                      completion=min(screen.completion, float(cap)) if cap else screen.completion,
                      prefix_share=0.0, latency_s=screen.latency_s, calls=0, source="design",
                      basis="2 calls a screened context whose actions differ (all assumed to); prompt: the longer "
                            "of the actor's and the screen's + 2 actions; output: the screen's")
    return {"calibrator/compare/calibrator-pair": pair, "calibrator/compare/calibrator-compare": compare}
