"""The history study's own prompt files (``config/prompts/history/``, ``history.prompts_dir``):
the judge's repetition screen of Appendix B.1 (the paper names its purpose, not its text:
the files are ours, ``SOURCES.md`` there).  The actor, review and reference prompts the study
shares with the others are the agent layer's (:mod:`memtrials.agent.prompts`)."""

from __future__ import annotations

from typing import Any, Sequence

from memtrials.agent.prompts import ActorPrompts, fill
from memtrials.agent.render import Message, Segment, render_block
from memtrials.config.prompts import PromptFiles

PROMPT_FILES: tuple[str, ...] = ("judge_repetition_system.txt", "judge_repetition_user.txt")

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"supports_repetition": {"type": "boolean"}},
    "required": ["supports_repetition"],
    "additionalProperties": False,
}
"""The screen's one valid output: does the feedback support a third execution?"""


class JudgePrompts(PromptFiles):
    """The repetition screen's prompt files (``history.prompts_dir``)."""

    NAMES = PROMPT_FILES
    WHAT = "history"

    def judge_messages(self, actor: ActorPrompts, *, env: str, task: str, history: Sequence[Segment],
                       action: str, observation: str) -> list[Message]:
        """Appendix B.1 screen: does the feedback support a third execution of ``action``?
        (``actor`` names the environment, as in the actor's own prompt.)"""
        user = fill(self.t("judge_repetition_user.txt"), environment=actor.environment(env), task=task,
                    history=render_block(history), action=action, observation=observation)
        return [{"role": "system", "content": self.t("judge_repetition_system.txt")},
                {"role": "user", "content": user}]
