"""The joint actor of section 6.4 / Appendix G.3 and its action-only baseline, in rollouts.

- **joint** (``ActorSettings.mode == "joint"``): each reply is one
  ``<calibration>{G.2 output}</calibration>`` block reviewing the immediately preceding
  completed transition (NOUPDATE at the first step), then the environment action in
  ``<action>`` tags.  The actor loop (:func:`memtrials.agent.actor.run_episode`) parses the
  block (:func:`memtrials.agent.parse.parse_joint`): a CALIBRATE experience goes beside that
  transition (the Experience rendering of G.1) and stays in every later prompt; NOUPDATE or
  a malformed block (INVALID) leaves the history unchanged; the action is executed as any
  reply's (one that does not parse is a recorded invalid action).
- **action_only**: the Raw history and the action alone in ``<action>`` tags.

Both arms see the same actor prompt as the history study's block format except for the reply
instruction (ours, ``config/prompts/calibrator/respond_*.txt``), and
:func:`actor_prompt` renders it both for the rollouts (through the actor loop) and for the
SFT data (:mod:`.joint`), so a trained actor is evaluated on the prompts it was trained on.
Each arm runs on the history study's task list and seeds of each environment.  The joint arm's
reply is constrained by a grammar (``calibrator.joint.reply: constrained``) where the endpoint
takes one and the actions are listed, else free text.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Mapping, Sequence

from memtrials.agent.actor import ActorSettings, ViewComposer
from memtrials.agent.job import open_job, pool_size
from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.records import STEP_SCHEMA
from memtrials.agent.render import Message
from memtrials.agent.runner import EpisodeSpec, write_episodes
from memtrials.agent.views import Entry
from memtrials.seeds import seed_of
from memtrials.studies.history.calibrator.prompts import CalibratorPrompts
from memtrials.studies.history.design import ACTOR_KEYS, read_tasks

log = logging.getLogger(__name__)

ARMS: dict[str, tuple[str, str]] = {"joint": ("experience", "joint"), "action_only": ("raw", "react")}
"""Arm -> (history view, actor mode)."""


@dataclasses.dataclass(frozen=True)
class JointActorPrompts(ActorPrompts):
    """The actor's prompt (as the history study renders it) with an arm's reply instruction (``respond``: listed
    actions, ``respond_code``: AppWorld's code actions)."""

    respond: str = ""
    respond_code: str = ""

    @classmethod
    def for_arm(cls, actor: ActorPrompts, calibrator: CalibratorPrompts, arm: str) -> "JointActorPrompts":
        if arm not in ARMS:
            raise ValueError(f"unknown joint-actor arm {arm!r}; known: {', '.join(ARMS)}")
        return cls(directory=actor.directory, texts=actor.texts, resolved=actor.resolved,
                   respond=calibrator.t(f"respond_{arm}.txt"), respond_code=calibrator.t(f"respond_{arm}_code.txt"))

    def response_instruction(self, mode: str, admissible: Sequence[str] | None) -> str:
        return self.respond_code if admissible is None else self.respond


def load_prompts(actor_prompts_dir: str, calibrator_prompts_dir: str, arm: str) -> JointActorPrompts:
    return JointActorPrompts.for_arm(ActorPrompts.load(actor_prompts_dir),
                                     CalibratorPrompts.load(calibrator_prompts_dir), arm)


REPLIES = ("constrained", "free")
"""``calibrator.joint.reply``: constrained (a grammar where the endpoint takes one) | free."""


def arm_settings(model: str, arm: str, actor: Mapping[str, Any], max_output_tokens: int | None,
                 reply: str = "free", max_experience_chars: int | None = None) -> ActorSettings:
    """The actor of one arm: history's actor settings, the arm's view and mode, no separate review.
    The joint arm with ``reply == "constrained"`` asks for a grammar-constrained reply (a valid
    calibration block with an experience of at most ``max_experience_chars`` characters, then
    a listed action) wherever the endpoint takes a grammar and actions are listed; elsewhere,
    and with ``free``, the reply is free text, parsed or recorded invalid."""
    if reply not in REPLIES:
        raise ValueError(f"calibrator.joint.reply: {reply!r}; allowed: {', '.join(REPLIES)}")
    unknown = sorted(set(actor) - set(ACTOR_KEYS))
    if unknown:
        raise ValueError(f"history.actor: unknown key(s) {unknown}; allowed: {', '.join(ACTOR_KEYS)}")
    view, mode = ARMS[arm]
    kw = {k: v for k, v in actor.items() if k not in ("mode", "review_max_tokens", "max_output_tokens")}
    chars = int(max_experience_chars or 0) if (arm == "joint" and reply == "constrained") else None
    if chars is not None and chars < 1:
        raise ValueError("calibrator.joint.max_experience_chars: must be >= 1 for a constrained joint reply")
    return ActorSettings(model=model, view=view, mode=mode, review=False, max_output_tokens=max_output_tokens,
                         joint_grammar_chars=chars, **kw)


def actor_prompt(prompts: JointActorPrompts, *, env: str, task: str, entries: Sequence[Entry], observation: str,
                 step: int, shown: Sequence[str] | None, arm: str) -> list[Message]:
    """The messages of an arm's request at ``step`` after ``entries`` (what the actor loop sends)."""
    view, mode = ARMS[arm]
    history, label, _ = ViewComposer(view).actor(entries)
    return prompts.actor_messages(env=env, task=task, history=history, current_observation=observation,
                                  current_label=label, step_count=step - 1, admissible=shown, mode=mode)


async def joint_rollouts(config: Mapping[str, Any], *, arm: str, model: str, env: str, cell: Mapping[str, Any],
                         max_output_tokens: int | None, actor_prompts_dir: str, calibrator_prompts_dir: str,
                         tasks_path: str, out_episodes: str, out_steps: str, out_calls: str,
                         make_env: Any = None) -> None:
    """One arm's cell for endpoint ``model`` on the task list of the history study's (env) cells."""
    tasks = read_tasks(tasks_path, int(cell["tasks_per_cell"]), cell["split"], int(cell["seed"]), env,
                       cell.get("task_types"))
    seeds = [seed_of(int(cell["seed"]), env, t) for t in tasks]
    settings = arm_settings(model, arm, cell["actor"], max_output_tokens, cell["reply"],
                            cell["max_experience_chars"])
    prompts = load_prompts(actor_prompts_dir, calibrator_prompts_dir, arm)
    name = f"calibrator/joint/{arm}/{model}/{env}"
    specs = [EpisodeSpec(env, t, f"{name}/{t}", s, settings) for t, s in zip(tasks, seeds)]
    in_flight = pool_size(int(cell["in_flight"]), len(tasks))
    async with open_job(config, name, out_calls, prompts, env=env, in_flight=in_flight, episodes=len(tasks),
                        env_options=cell["env_options"], make_env=make_env) as (runner, client):
        client.expect(len(tasks) * settings.max_actions)
        episodes = await runner.concurrent(specs)
        log.info("%s: %d episodes, %d won; %d fresh calls, %d from cache", name, len(episodes),
                 sum(e.summary["won"] for e in episodes), client.fresh_calls, client.cache_hits)
    write_episodes(episodes, {"model": model, "env": env, "condition": arm}, {t: i for i, t in enumerate(tasks)},
                   out_episodes, out_steps, step_schema=STEP_SCHEMA)
