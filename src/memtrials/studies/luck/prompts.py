"""Rendering of the luck study's writer and reader prompts (*Lessons from Luck*,
section 3.2, section 3.3, Appendices A-B) from the files in ``config/prompts/luck/``.

The files are protocol (their SHA-256 is asserted by the tests and frozen in the
manifest); this module only fills in the world-specific fields.
"""

from __future__ import annotations

from typing import Any

from memtrials.config.prompts import PromptFiles, sha256_text
from memtrials.studies.luck.domains import DOMAIN_BY_KEY
from memtrials.studies.luck.worlds import World

PROMPT_FILES = (
    "writer_rb_success.md", "writer_rb_failure.md", "writer_rbd_success.md",
    "writer_rbd_failure.md", "writer_n.md", "writer_user.txt", "trajectory.txt",
    "choice_good.txt", "choice_bad.txt", "observation_failure.txt", "run_log.txt",
    "cue_explicit.txt", "reader_system.txt", "reader_user.txt", "previous_success.txt",
    "previous_failure.txt", "memory_neutral.txt", "memory_planted.txt",
)

Messages = list[dict[str, str]]


class PromptSet(PromptFiles):
    """The loaded prompt files; ``texts`` maps file name to its exact content
    (loading and digests: :class:`memtrials.config.prompts.PromptFiles`)."""

    NAMES = PROMPT_FILES
    WHAT = "luck"

    def _t(self, name: str) -> str:
        return self.texts[name].rstrip("\n")

    # ----- shared pieces -------------------------------------------------------------
    def tool_lines(self, w: World) -> str:
        desc = DOMAIN_BY_KEY[w.domain].description
        return "\n".join(
            f"- {tool}: {desc.format(Name=w.coined(tool).capitalize())}" for tool in w.tools
        )

    def run_log(self, w: World) -> str:
        first, second = w.tools
        return self._t("run_log.txt").format(
            n_runs=w.n_runs, first_tool=first, second_tool=second,
            first_successes=w.successes(first), second_successes=w.successes(second),
            cue=self._t("cue_explicit.txt") if w.cue == "explicit" else "",
        )

    @staticmethod
    def used_tool(w: World, decision: str) -> str:
        if decision not in ("good", "bad"):
            raise ValueError(f"decision must be 'good' or 'bad', got {decision!r}")
        return w.better_tool if decision == "good" else w.worse_tool

    # ----- writers (section 3.2, Appendix A) -----------------------------------------
    def writer_instruction(self, instruction: str, outcome: str) -> str:
        if instruction == "N":
            return self.texts["writer_n.md"]
        if instruction not in ("RB", "RBD") or outcome not in ("success", "failure"):
            raise ValueError(f"no writer instruction for {instruction!r} after {outcome!r}")
        return self.texts[f"writer_{instruction.lower()}_{outcome}.md"]

    def trajectory(self, w: World, decision: str, outcome: str) -> str:
        used = self.used_tool(w, decision)
        first, second = w.tools
        dom = DOMAIN_BY_KEY[w.domain]
        returned = dom.success if outcome == "success" else w.error_text
        observation = (dom.success if outcome == "success"
                       else self._t("observation_failure.txt").format(error=w.error_text))
        choice = self._t(f"choice_{decision}.txt").format(used_tool=used)
        return self._t("trajectory.txt").format(
            run_log=self.run_log(w), first_tool=first, second_tool=second,
            first_successes=w.successes(first), second_successes=w.successes(second),
            n_runs=w.n_runs, choice=choice, used_tool=used, observation=observation,
            returned=returned,
        )

    def writer_messages(self, w: World, instruction: str, decision: str, outcome: str) -> Messages:
        user = self._t("writer_user.txt").format(
            task=DOMAIN_BY_KEY[w.domain].task, tool_lines=self.tool_lines(w),
            trajectory=self.trajectory(w, decision, outcome),
        )
        return [{"role": "system", "content": self.writer_instruction(instruction, outcome)},
                {"role": "user", "content": user}]

    # ----- memory items (section 3.3) -------------------------------------------------
    def neutral_memory(self, w: World) -> str:
        dom = DOMAIN_BY_KEY[w.domain]
        return self._t("memory_neutral.txt").format(
            title=dom.fact_title, description=dom.fact_description, content=dom.fact_content)

    def planted_memory(self, w: World) -> str:
        return self._t("memory_planted.txt").format(worse_tool=w.worse_tool)

    # ----- reader (section 3.3, Appendix B) -------------------------------------------
    def previous_run(self, w: World, decision: str, outcome: str) -> str:
        used = self.used_tool(w, decision)
        if outcome == "success":
            return self._t("previous_success.txt").format(used_tool=used)
        return self._t("previous_failure.txt").format(used_tool=used, error=w.error_text)

    def reader_messages(self, w: World, decision: str, outcome: str, memory: str) -> Messages:
        if not memory.strip():
            raise ValueError(f"{w.world_id}: empty memory item; missing lessons are not shown to readers")
        user = self._t("reader_user.txt").format(
            task=DOMAIN_BY_KEY[w.domain].task, tool_lines=self.tool_lines(w),
            run_log=self.run_log(w), previous_run=self.previous_run(w, decision, outcome),
            memory=memory,
        )
        return [{"role": "system", "content": self._t("reader_system.txt")},
                {"role": "user", "content": user}]


def answer_schema(w: World) -> dict[str, Any]:
    """JSON schema of a reader's answer: ``first_tool`` restricted to the two tools."""
    return {
        "type": "object",
        "properties": {
            "first_tool": {"type": "string", "enum": list(w.tools)},
            "reason": {"type": "string"},
        },
        "required": ["first_tool", "reason"],
        "additionalProperties": False,
    }
