"""Anti-persistence: trajectories and an outcome log kept; guidance built per task and dropped.

The anti-persistence paper's design, on the memory lifecycle (:mod:`memtrials.memory.base`).

**Kept** (:meth:`AntiPersistenceMemory.update`, after each batch, in run order): every
training episode as a trajectory record (:mod:`memtrials.memory.trajectory`: task, actions,
observations truncated to ``obs_chars``, outcome; the task embedded once), and one
outcome-log entry per episode in the selector (:mod:`memtrials.stats.bandit`): the mode,
the raw success, the extra synthesis calls, the cost-adjusted reward
``clip(success - lam * calls, -1, 1)``, the round and the trajectory id, **never the
guidance text**.  There is no abstraction store: ``kept`` stays empty (unless ``persist``).

**Served** (:meth:`AntiPersistenceView.for_episode`, once per episode): the task is embedded;
the selector chooses a mode from the outcome log (context vectors: the log entries' task
embeddings; rotation rounds and positions from ``rounds``, below); then at most ``k`` (5)
trajectories are retrieved by cosine to the task and

- ``none``: the retrieved trajectories (any outcome) are the block; no synthesis call;
- ``imitation`` / ``strategic``: the ``k`` most similar **successes** are given to one
  ``synthesizer`` call (``purpose="antipersist_synthesis"``; the mode's system prompt) that
  writes guidance for this task: action patterns with the conditions they applied under /
  subgoals, tool use and recovery.  With no success on hand: nothing is served and no
  call is made (status ``no_success``);
- ``corrective``: the ``k - 1`` most similar **failures** and the one most similar success
  (``k`` failures when there is no success, or when ``k = 1``) are given to the call, which writes "do not
  X, because Y" rules.  With no failure on hand it returns empty: nothing is served, no
  call is made (status ``no_failure``), and the episode is credited to ``corrective``; it
  never falls through to another mode.

The guidance is the block of every step of this episode (title "Guidance for this task";
lesson ids: the trajectories it was built from) and is gone when the episode ends: it is
in the actor's prompts and the call record, not in the memory.  An empty reply serves
nothing (status ``empty_reply``; the call counts).

**Episode columns** (``episode_columns``; the runner copies them into the episode summary):
``retrieval`` (JSON ``[{id, cosine}]`` of the trajectories used), ``synthesis_calls`` (0 or 1),
``mode`` (the synthesis mode), ``mode_reason`` (``rotation`` | ``explore`` | ``neighbours`` |
``fallback`` | ``empty`` | ``fixed`` | ``uniform``), ``mode_propensity``, ``mode_selection``
(JSON: the selector's scores, neighbours, mean cosine), ``synthesis_status`` (``not_needed``
| ``ok`` | ``empty_reply`` | ``no_success`` | ``no_failure``), ``guidance_chars``,
``guidance_cut`` (characters of the reply beyond ``carry.max_chars`` left out); the
persisted variant adds ``guidance`` (the text, which its update keeps).

**Persisted variant** (``persist=True``, kind ``antipersistence_persist``), for the
keep-versus-discard comparison: the same synthesized guidance is also kept after the
episode (ids ``G00001..``, its text embedded once), and later tasks are served, after
this task's own block, the ``k`` kept guidance texts most similar to the task (title
"Guidance kept from earlier tasks").

Construction (keywords): ``synthesizer``, ``embedder`` (endpoint names), ``prompts_dir``
(default ``config/prompts/memory``), ``k`` (5), ``selector`` (a policy object of
:mod:`memtrials.stats.bandit` over :data:`MODES`, or its settings mapping for
:func:`~memtrials.stats.bandit.make_selector`, e.g. ``{"policy": "fixed", "arm":
"strategic"}``; default: the paper's bandit), ``persist`` (False), ``rounds`` (the training
stream's plan: one list per round of its episode ids or ``EpisodeSpec`` s, in play order; an
episode's round and position in it drive the rotation, whatever the batch size; an episode
outside the plan, e.g. a held-out evaluation, is chosen by the rule past the rotation, and a
*training* episode outside it is logged with a warning), ``round_size`` (optional: the round
recorded for a training episode outside the plan, ``len(log) // round_size``),
``obs_chars``, ``max_tokens`` (synthesis output cap).
Evaluation serves :meth:`~AntiPersistenceMemory.frozen` without calling ``update``: its
logs never enter the memory.  The prompts are the project's own
(``config/prompts/memory/guidance_*.md``; the paper prints none).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from memtrials.memory.abstraction import PROMPTS_DIR
from memtrials.llm.carry import carry
from memtrials.memory.base import Lesson, MemoryBlock, StaticEpisode, TaskContext
from memtrials.memory.trajectory import (
    OBS_CHARS, RETRIEVAL_COLUMNS, TrajectoryMemory, VectorIndex, nearest, prompt_body, render_trajectory,
    trajectories_block,
)
from memtrials.config.prompts import PromptFiles
from memtrials.stats.bandit import KNNBandit, OutcomeLog, make_selector

if TYPE_CHECKING:
    from memtrials.llm import Client

log = logging.getLogger(__name__)

MODES = ("none", "imitation", "strategic", "corrective")
PROMPT_FILES = ("guidance_imitation.md", "guidance_strategic.md", "guidance_corrective.md", "guidance_user.md")
GUIDANCE_TITLE = "Guidance for this task"
KEPT_TITLE = "Guidance kept from earlier tasks"
EPISODE_COLUMNS: tuple[pa.Field, ...] = RETRIEVAL_COLUMNS + (
    pa.field("mode", pa.string()), pa.field("mode_reason", pa.string()),
    pa.field("mode_propensity", pa.float64()), pa.field("mode_selection", pa.string()),
    pa.field("synthesis_status", pa.string()), pa.field("guidance_chars", pa.int64()),
    pa.field("guidance_cut", pa.int64()))
PERSIST_COLUMNS: tuple[pa.Field, ...] = EPISODE_COLUMNS + (pa.field("guidance", pa.string()),)


def plan_of(rounds: Sequence[Sequence[Any]] | None) -> dict[str, tuple[int, int]]:
    """Episode id -> (round, position in the round) of a training stream's plan: one list per
    round of episode ids or of :class:`~memtrials.agent.runner.EpisodeSpec` s (their ``episode_id``)."""
    plan: dict[str, tuple[int, int]] = {}
    for r, items in enumerate(rounds or ()):
        for j, item in enumerate(items):
            eid = str(getattr(item, "episode_id", item))
            if eid in plan:
                raise ValueError(f"anti-persistence rounds: episode id {eid!r} appears twice; every training "
                                 "episode needs its own id")
            plan[eid] = (r, j)
    return plan


def selector_of(selector: Any) -> OutcomeLog:
    """The policy an anti-persistence memory uses (see module docstring)."""
    if selector is None:
        return KNNBandit(MODES)
    if isinstance(selector, Mapping):
        return make_selector(selector, MODES)
    if tuple(getattr(selector, "arms", ())) != MODES:
        raise ValueError(f"anti-persistence selector: its arms must be {list(MODES)} in this order, got "
                         f"{list(getattr(selector, 'arms', []))}")
    return selector


def clone(selector: OutcomeLog) -> OutcomeLog:
    """A copy of ``selector`` with its own copy of the log (a frozen view's)."""
    out = make_selector({k: v for k, v in selector.settings().items()}, selector.arms)
    out.load(json.loads(json.dumps(selector.state())))
    return out


def retrieve(mode: str, records: Sequence[Mapping[str, Any]], index: VectorIndex, query: Any,
             k: int) -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
    """The trajectories a mode works from (module docstring), and their ``retrieval`` entries."""
    wins = [r for r in records if r["won"]]
    if mode == "none":
        return nearest(index, query, records, k)
    if mode in ("imitation", "strategic"):
        return nearest(index, query, wins, k)
    fails = [r for r in records if not r["won"]]
    if not fails:
        return [], []
    contrast, info_c = nearest(index, query, wins, 1) if k > 1 else ([], [])  # k = 1: the failure alone
    chosen, info = nearest(index, query, fails, k - len(contrast))
    return chosen + contrast, info + info_c


class AntiPersistenceView:
    """A frozen anti-persistence memory: chooses a mode and builds this task's block."""

    step_columns: Sequence[pa.Field] = ()

    def __init__(self, *, records: Sequence[Mapping[str, Any]], index: VectorIndex, selector: OutcomeLog,
                 plan: Mapping[str, tuple[int, int]], prompts: PromptFiles, synthesizer: str, k: int,
                 max_tokens: int | None, persist: bool, kept: Sequence[Mapping[str, Any]]) -> None:
        self.records, self.index, self.selector, self.plan = list(records), index, selector, plan
        self.prompts, self.synthesizer, self.k, self.max_tokens = prompts, synthesizer, k, max_tokens
        self.persist, self.kept = persist, list(kept)
        self.by_id = {r["id"]: r for r in self.records}
        self.episode_columns: Sequence[pa.Field] = PERSIST_COLUMNS if persist else EPISODE_COLUMNS

    def messages(self, mode: str, task: str, chosen: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
        user = prompt_body(self.prompts.texts["guidance_user.md"]).format(
            task=task, n=len(chosen), trajectories="\n\n".join(render_trajectory(r) for r in chosen))
        return [{"role": "system", "content": prompt_body(self.prompts.texts[f"guidance_{mode}.md"])},
                {"role": "user", "content": user}]

    async def for_episode(self, client: Client, task: TaskContext) -> StaticEpisode:
        query = await self.index.query(client, task.task)
        rnd, pos = self.plan.get(task.episode_id, (None, None))
        vectors = self.index.matrix([self.by_id[e["trajectory"]]["task"] for e in self.selector.log])
        choice = self.selector.choose(query, vectors, key=task.episode_id, round=rnd, position=pos)
        mode = choice.arm
        chosen, info = retrieve(mode, self.records, self.index, query, self.k)
        calls, guidance, block, guidance_cut = 0, "", None, 0
        if mode == "none":
            status = "not_needed"
            block = trajectories_block(chosen) if chosen else None
        elif not chosen:
            status = "no_failure" if mode == "corrective" else "no_success"
        else:
            r = await client.complete(self.synthesizer, self.messages(mode, task.task, chosen),
                                      max_tokens=self.max_tokens, purpose="antipersist_synthesis")
            kept_text = carry(r.text.strip())  # carry.max_chars
            calls, guidance, guidance_cut = 1, kept_text.text, kept_text.cut
            status = "ok" if guidance else "empty_reply"
            if guidance:
                block = MemoryBlock(tuple(Lesson(x["id"], x["task"]) for x in chosen), GUIDANCE_TITLE,
                                    f"{GUIDANCE_TITLE}:\n{guidance}\n")
        if self.persist and self.kept:
            kept, info_k = nearest(self.index, query, self.kept, self.k, text="text")
            old = MemoryBlock(tuple(Lesson(x["id"], x["text"]) for x in kept), KEPT_TITLE)
            block = old if block is None else MemoryBlock(block.lessons + old.lessons, block.title,
                                                          block.render() + old.render())
            info = info + info_k
        cols = {"retrieval": json.dumps(info), "synthesis_calls": calls, "mode": mode,
                "mode_reason": choice.reason, "mode_propensity": float(choice.propensity),
                "mode_selection": json.dumps(choice.data(), sort_keys=True), "synthesis_status": status,
                "guidance_chars": len(guidance), "guidance_cut": guidance_cut}
        if self.persist:
            cols["guidance"] = guidance
        return StaticEpisode(block, cols)


class AntiPersistenceMemory:
    """See module docstring."""

    def __init__(self, *, synthesizer: str, embedder: str, prompts_dir: str | Path = PROMPTS_DIR, k: int = 5,
                 selector: Any = None, persist: bool = False, rounds: Sequence[Sequence[Any]] | None = None,
                 round_size: int | None = None, obs_chars: int = OBS_CHARS, max_tokens: int | None = None) -> None:
        self.store = TrajectoryMemory(embedder=embedder, k=k, obs_chars=obs_chars)
        self.synthesizer, self.embedder, self.k, self.max_tokens = synthesizer, embedder, int(k), max_tokens
        self.persist = bool(persist)
        self.selector = selector_of(selector)
        self.plan = plan_of(rounds)
        plan = json.dumps(sorted((e, *v) for e, v in self.plan.items()))
        self.plan_digest = hashlib.sha256(plan.encode()).hexdigest()
        self.round_size = None if round_size is None else int(round_size)
        self._warned = False
        self.prompts = PromptFiles.load(prompts_dir, PROMPT_FILES, what="memory")
        self.kept: list[dict[str, Any]] = []
        self.batches = 0

    @property
    def kind(self) -> str:
        return "antipersistence_persist" if self.persist else "antipersistence"

    @property
    def episode_columns(self) -> Sequence[pa.Field]:
        return PERSIST_COLUMNS if self.persist else EPISODE_COLUMNS

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.store.records

    @property
    def outcome_log(self) -> list[dict[str, Any]]:
        return self.selector.log

    def frozen(self) -> AntiPersistenceView:
        return AntiPersistenceView(
            records=self.store.records, index=self.store.index.copy(), selector=clone(self.selector), plan=self.plan,
            prompts=self.prompts, synthesizer=self.synthesizer, k=self.k, max_tokens=self.max_tokens,
            persist=self.persist, kept=self.kept)

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        for ep in episodes:
            if "mode" not in ep.summary:
                raise ValueError(
                    f"anti-persistence update: episode {ep.summary.get('episode_id')!r} carries no 'mode' "
                    "column, so it was not served by this memory's view. Fix: play it through Runner.stream(specs, "
                    "memory, ...) with this memory (an evaluation's episodes never enter an update).")
        new = await self.store.keep(client, episodes)
        added = []
        for ep, rec in zip(episodes, new):
            s, eid = ep.summary, str(ep.summary["episode_id"])
            rnd = self.plan[eid][0] if eid in self.plan else self._unplanned(eid)
            self.selector.record(str(s["mode"]), bool(s["won"]), int(s["synthesis_calls"]), key=eid,
                                 round=rnd, trajectory=rec["id"], task_id=str(s["task_id"]))
            if self.persist and s.get("guidance"):
                self.kept.append({"id": f"G{len(self.kept) + 1:05d}", "text": str(s["guidance"]), "episode_id": eid,
                                  "mode": str(s["mode"]), "batch": self.batches})
                added.append(self.kept[-1]["text"])
        await self.store.index.add(client, added)
        self.batches += 1

    def _unplanned(self, eid: str) -> int | None:
        """The round of a training episode outside the plan (``len(log) // round_size``), with a
        warning once when the selector would still be rotating: its mode skipped the rotation."""
        rnd = None if self.round_size is None else len(self.selector.log) // self.round_size
        rotating = getattr(self.selector, "rotate_rounds", 0) > 0 and (rnd is None or rnd < self.selector.rotate_rounds)
        if rotating and not self._warned:
            self._warned = True
            log.warning("anti-persistence: training episode %r is not in the rounds plan, so its mode was chosen "
                        "without the rotation of the first rounds. Fix: pass rounds=[[episode ids or specs of "
                        "round 1], ...] when building the memory.", eid)
        return rnd

    def settings(self) -> dict[str, Any]:
        return {"synthesizer": self.synthesizer, "embedder": self.embedder, "k": self.k,
                "obs_chars": self.store.obs_chars, "max_tokens": self.max_tokens, "persist": self.persist,
                "selector": self.selector.settings(), "rounds": self.plan_digest,
                "round_size": self.round_size, "prompts": self.prompts.version()}

    def state(self) -> dict[str, Any]:
        return {"settings": self.settings(), "batches": self.batches,
                "records": json.loads(json.dumps(self.store.records)), "vectors": self.store.index.state(),
                "outcome_log": [dict(e) for e in self.selector.log], "kept": [dict(x) for x in self.kept]}

    def load(self, state: Mapping[str, Any]) -> None:
        """Adopt a state's trajectories, outcome log and kept guidance (this memory's settings are kept)."""
        self.store.load({"records": state["records"], "vectors": state["vectors"]})
        self.selector.load({"log": state["outcome_log"]})
        self.kept = [dict(x) for x in state["kept"]]
        self.batches = int(state["batches"])
