"""Per-call figures from the design for the anti-persistence study's purposes that no run has
measured (``python -m memtrials estimate``; :meth:`memtrials.pipeline.study.Study.design_figures`).

The default run on the embedded model exercises every design, but a baseline's memory calls
happen only once an episode succeeds: ExpeL compares a failure with a stored success of its
task and chunks of successes (``expel_insights``) and retrieves stored successes
(``expel_retrieval``); AutoRefine retrieves its skills (``autorefine_retrieval``) once its
synthesis has added one.  The embedded model rarely succeeds, so these calls are never made.
Their figures here are bounds from the design (the memories' modules say what each call holds):

- **retrieval** (embeddings): one query text (the task) per episode, and at most one stored
  text per training episode (ExpeL: a success's task; AutoRefine: a batch's new skills, at most
  one synthesis answer spread over the batch's ``batch_size`` episodes), each embedded once per
  cell; an evaluation cell embeds the evaluated snapshot's stored texts once over its episodes.
  Tokens per task text: the measured task-text embeddings of the same phase (every retrieving
  memory embeds the task, ``antipersist/<phase>/<design>/retrieval``); a skill's: the measured
  AutoRefine synthesis answer.
- **ExpeL's insight calls**: at most one per training episode (one per failed episode whose task
  has a stored success, one per ``expel.success_chunk`` successes); the prompt: the measured
  prompt of AutoRefine's contrastive synthesis in the same phase (attempts' trajectories beside
  a list of what was learnt, with the same trajectory text) plus the insight list half full
  (``expel.max_rules`` / 2 insights, each at most one answer); the output: that synthesis's
  measured answer, within ``antipersist.synthesis.max_tokens``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from memtrials.pipeline.workload import Profile, tasks_of
from memtrials.studies.antipersist.memories import declared_calls

if TYPE_CHECKING:
    from memtrials.studies.antipersist.workflow import AntipersistWorkflow

ANALOGUE = "antipersist/train/autorefine/autorefine_synthesis"
"""The measured chat call that stands for ExpeL's insight calls (a contrastive synthesis over trajectories)."""


def _prompt(p: Profile) -> float:
    """A measured figure's mean prompt tokens (its line at its mean step)."""
    return max(0.0, p.prompt_base + p.prompt_per_step * (p.mean_step - 1.0))


def task_text(measured: Mapping[str, Profile], phase: str) -> Profile | None:
    """The mean of the measured task-text embeddings (``retrieval``) of ``phase``, else of any phase."""
    for prefix in (f"antipersist/{phase}/", "antipersist/"):
        got = [p for k, p in measured.items() if k.startswith(prefix) and k.endswith("/retrieval") and p.calls]
        if got:
            n = sum(p.calls for p in got)
            return Profile(1.0, sum(_prompt(p) * p.calls for p in got) / n, 0.0, 0.0, 0.0,
                           sum(p.latency_s * p.calls for p in got) / n, 0, task="embed")
    return None


def stored_per_episode(study: AntipersistWorkflow, phase: str) -> float:
    """Stored texts an episode of ``phase`` embeds beside its query, at most (an evaluation
    cell: the training stream's, at most one per training episode, over its episodes)."""
    if phase == "train":
        return 1.0
    a, ratios = study.a, [0.0]
    rounds, size = int(a["rounds"]), int(a["round_size"])
    # the snapshot evaluated: the last round's, or every round's (their mean store: (rounds + 1) / 2 rounds')
    stored = size * ((rounds + 1) / 2.0 if a["eval_every_round"] else rounds)
    for _m, env, _d, _s in study.jobs():
        pool = a["pools"][env]
        n_eval = tasks_of(env, str(pool["eval_split"]), pool["eval_tasks"], study.config["envs"])
        if n_eval:
            ratios.append(stored / float(n_eval))
    return max(ratios)


def retrieval(study: AntipersistWorkflow, measured: Mapping[str, Profile], phase: str, design: str) -> Profile | None:
    query = task_text(measured, phase)
    if query is None:
        return None
    stored, per = stored_per_episode(study, phase), query.prompt_base
    if design == "autorefine":
        answer = measured.get(ANALOGUE)
        if answer is None:
            return None
        per = answer.completion / max(1, int(study.a["batch_size"]))
    calls = 1.0 + stored
    return Profile(calls_per_unit=calls, prompt_base=(query.prompt_base + stored * per) / calls, prompt_per_step=0.0,
                   completion=0.0, prefix_share=0.0, latency_s=query.latency_s, calls=0, task="embed",
                   source="design", basis=f"1 query + at most {stored:g} stored text(s) an episode; tokens: the "
                                          f"measured task-text embeddings of {phase}"
                                          + (" and AutoRefine's synthesis answer" if design == "autorefine" else ""))


def insights(study: AntipersistWorkflow, measured: Mapping[str, Profile]) -> Profile | None:
    p = measured.get(ANALOGUE)
    if p is None:
        return None
    cap = study.a["synthesis"]["max_tokens"]
    answer = min(p.completion, float(cap)) if cap else p.completion
    listed = int(study.a["expel"]["max_rules"]) / 2.0 * answer
    return Profile(calls_per_unit=1.0, prompt_base=_prompt(p) + listed, prompt_per_step=0.0, completion=answer,
                   prefix_share=p.prefix_share, latency_s=p.latency_s, calls=0, source="design",
                   basis=f"at most 1 call an episode; prompt: {ANALOGUE}'s + the insight list half full "
                         f"({listed:.0f} tokens); output: its answer")


def design_figures(study: AntipersistWorkflow, measured: Mapping[str, Profile]) -> dict[str, Profile]:
    """Figures for each declared purpose of the study's designs that ``measured`` lacks (module docstring)."""
    out: dict[str, Profile] = {}
    for design in sorted({d for _m, _e, d, _s in study.jobs()}):
        for phase in ("train", "eval"):
            for purpose, task in sorted((declared_calls(design, phase) or {}).items()):
                key = f"antipersist/{phase}/{study.measured_design(design)}/{purpose}"
                if key in measured:
                    continue
                got = retrieval(study, measured, phase, design) if task == "embed" else \
                    insights(study, measured) if purpose == "expel_insights" else None
                if got is not None:
                    out[key] = got
    return out
