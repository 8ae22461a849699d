"""The calibrator's own prompt files (``config/prompts/calibrator/``): the judge's
content screen and its blind next-action comparison, and the reply instructions of the joint
actor and its action-only baseline (section 6.4).  The paper describes the screen and the
comparison (section 6.1, Appendices D.4 and G.3) and prints only the calibration block's two
forms (G.3), no prompt: every text here is the project's own (``SOURCES.md`` there).  The
review itself is the actor's Appendix G.2 prompt (:mod:`memtrials.agent.prompts`)."""

from __future__ import annotations

from typing import Any, Sequence

from memtrials.agent.prompts import ActorPrompts, fill
from memtrials.agent.render import Message, Segment, render_block
from memtrials.config.prompts import PromptFiles

PROMPT_FILES: tuple[str, ...] = ("screen_system.txt", "screen_user.txt", "compare_system.txt", "compare_user.txt",
                                 "respond_joint.txt", "respond_joint_code.txt", "respond_action_only.txt",
                                 "respond_action_only_code.txt")

SCREEN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"unsupported": {"type": "boolean"}, "restates_observation": {"type": "boolean"}},
    "required": ["unsupported", "restates_observation"], "additionalProperties": False,
}
COMPARE_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"better": {"enum": ["A", "B", "tie"]}},
    "required": ["better"], "additionalProperties": False,
}


class CalibratorPrompts(PromptFiles):
    """The screen and comparison prompts (``calibrator.prompts_dir``)."""

    NAMES = PROMPT_FILES
    WHAT = "calibrator"

    def screen_messages(self, actor: ActorPrompts, *, env: str, task: str, history: Sequence[Segment],
                        action: str, observation: str, experience: str) -> list[Message]:
        """The content screen: unsupported claims, restatement of the observation (section 6.1)."""
        user = fill(self.t("screen_user.txt"), environment=actor.environment(env), task=task,
                    history=render_block(history), action=action, observation=observation, experience=experience)
        return [{"role": "system", "content": self.t("screen_system.txt")}, {"role": "user", "content": user}]

    def compare_messages(self, actor_prompt: str, action_a: str, action_b: str) -> list[Message]:
        """One blind comparison (G.3): the original actor prompt and two actions, no identifiers."""
        user = fill(self.t("compare_user.txt"), prompt=actor_prompt, action_a=action_a, action_b=action_b)
        return [{"role": "system", "content": self.t("compare_system.txt")}, {"role": "user", "content": user}]
