"""The actor's prompts (every study's), from ``config/prompts/actor/``.

The files are protocol (their sources are named in ``SOURCES.md`` there and their bytes
pinned by the tests); this module only fills in fields.  Fields are ``{name}``
placeholders replaced by name, so the JSON braces of the review prompt stay as written.

- actor, block format: ``actor_block.txt`` (history block of Appendix G.1, check reminder
  of Appendix D.1, memory block, current observation, admissible actions, response
  instruction); the line above the history is ``history_intro.txt``, or
  ``history_intro_reference.txt`` when the history holds a reference block (whose records
  the agent did not execute);
- actor, chat format (Appendix F): ``actor_system.txt`` + history messages +
  ``actor_user_current.txt``;
- Experience review (Appendix G.2): ``experience_review_system.txt`` + ``..._user.txt``;
- reference block (Appendix D.6): ``reference_open.txt``, ``reference_close.txt``,
  ``continuation_open.txt``.  In the chat format the block is its own user message and
  the current observation a separate one after it (Appendix F.2).

A study's own prompts (a judge's screen, say) live in the study's folder and package and
render with :func:`fill` and these pieces (:meth:`ActorPrompts.environment`).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import yaml

from memtrials.memory.base import MemoryBlock
from memtrials.agent.render import Message, Segment, chat_messages, render_block
from memtrials.config.prompts import PromptFiles

PROMPT_FILES: tuple[str, ...] = (
    "actor_block.txt", "history_intro.txt", "history_intro_reference.txt", "actor_system.txt", "actor_user_current.txt",
    "respond_choice.txt", "respond_react.txt", "respond_code.txt", "respond_template.txt",
    "check_reminder.txt", "experience_review_system.txt", "experience_review_user.txt",
    "reference_open.txt", "reference_close.txt", "continuation_open.txt",
    "environments.yaml",
)
MODES = ("choice", "react")
FORMATS = ("block", "chat")
_FIELD = re.compile(r"\{([a-z_]+)\}")
TEMPLATE = re.compile(r"^([A-Za-z_][A-Za-z0-9_ ]*)\[<[^<>\[\]\n]+>\]$")
"""An admissible entry whose bracketed argument is a placeholder the actor fills in."""

REVIEW_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "object", "properties": {"decision": {"const": "NOUPDATE"}, "experience": {"type": "null"}},
         "required": ["decision", "experience"], "additionalProperties": False},
        {"type": "object",
         "properties": {"decision": {"const": "CALIBRATE"}, "experience": {"type": "string", "minLength": 1}},
         "required": ["decision", "experience"], "additionalProperties": False},
    ]
}
"""The two valid outputs of the review (Appendix G.2)."""

def fill(template: str, **fields: Any) -> str:
    """Replace ``{name}`` placeholders; a placeholder without a field is an error."""
    names = set(_FIELD.findall(template))
    missing = sorted(n for n in names if n not in fields)
    if missing:
        raise KeyError(f"prompt template needs fields {missing}")
    return _FIELD.sub(lambda m: str(fields[m.group(1)]) if m.group(1) in fields else m.group(0), template)


_TASK_MARKER = re.compile(r"\A\s*your task is to\s*:?\s*", re.IGNORECASE)


def task_clause(task: str) -> str:
    """The task as the actor templates' ``Your task is to: {task}`` needs it: without the same
    words at its start.  ALFWorld's goal line ("Your task is to: put some cd on sidetable.")
    and ScienceWorld's task description ("Your task is to find a(n) non-living thing. ...")
    begin with them, so the prompt said "Your task is to: Your task is to ..."; a task without
    them (AppWorld's instruction) is unchanged."""
    rest = _TASK_MARKER.sub("", task, count=1)
    return rest if rest.strip() else task


def memory_lead(memory: MemoryBlock | None) -> str:
    """What ``{memory}`` becomes, between the environment's sentence and the task: a space
    when nothing is served (the verl-agent line as it was), else a line break and the block.

    The served block comes before the task because it is the part of a prompt that stays the
    same across episodes (a playbook candidate is served whole on every call): with the task
    first, every episode's first request differed from the start, and the server's prompt
    cache could reuse nothing of the block (issue 14)."""
    text = memory.render() if memory is not None else ""
    return "\n" + text if text else " "


class ActorPrompts(PromptFiles):
    """The actor's loaded prompt files (``texts``: file name -> exact content), with the
    digests and version of :class:`memtrials.config.prompts.PromptFiles`."""

    NAMES = PROMPT_FILES
    WHAT = "actor"

    def environment(self, env: str) -> str:
        table = yaml.safe_load(self.texts["environments.yaml"]) or {}
        if env not in table:
            raise KeyError(f"{self.directory}/environments.yaml: no description of environment {env!r}")
        return str(table[env])

    # -- pieces ------------------------------------------------------------------------
    def response_instruction(self, mode: str, admissible: Sequence[str] | None) -> str:
        if mode not in MODES:
            raise ValueError(f"unknown action mode {mode!r}; known: {', '.join(MODES)}")
        if admissible is None:
            return self.t("respond_code.txt")
        text = self.t("respond_choice.txt" if mode == "choice" else "respond_react.txt")
        if any(TEMPLATE.match(a) for a in admissible):  # a list with a placeholder (WebShop's search bar)
            text = text.rstrip("\n") + "\n" + self.t("respond_template.txt")
        return text

    @staticmethod
    def actions_section(admissible: Sequence[str] | None) -> str:
        if admissible is None:
            return ""
        return "Admissible actions:\n" + "\n".join(f"- {a}" for a in admissible) + "\n\n"

    def reminder(self, on: bool) -> str:
        return self.t("check_reminder.txt") + "\n" if on else ""

    def reference_segments(self, prefix: Segment, reference: Segment, continuation: Segment | None,
                           restored_step: int) -> list[Segment]:
        """Appendix D.6: prefix, delimited reference block, then the actual continuation.

        The block's three segments (open line, records, close line) are marked
        ``reference`` (in the chat format they form one user message)."""
        segs = [prefix,
                Segment(text=fill(self.t("reference_open.txt"), restored_step=restored_step), reference=True),
                Segment(items=reference.items, text=reference.text, reference=True),
                Segment(text=self.t("reference_close.txt"), reference=True),
                Segment(text=fill(self.t("continuation_open.txt"), restored_step=restored_step))]
        if continuation is None or not continuation.items:
            segs.append(Segment(text="None"))
        else:
            segs.append(continuation)
        return segs

    # -- the actor ---------------------------------------------------------------------
    def actor_messages(
        self, *, env: str, task: str, history: Sequence[Segment], current_observation: str,
        current_label: str, step_count: int, admissible: Sequence[str] | None, mode: str,
        fmt: str = "block", reminder: bool = False, memory: MemoryBlock | None = None,
    ) -> list[Message]:
        """The messages of one actor request (one user message in block format)."""
        if fmt not in FORMATS:
            raise ValueError(f"unknown history format {fmt!r}; known: {', '.join(FORMATS)}")
        with_reference = any(seg.reference for seg in history)
        common = dict(
            environment=self.environment(env), task=task_clause(task),
            memory=memory_lead(memory),
            response_instruction=self.response_instruction(mode, admissible),
            reminder=self.reminder(reminder), current_label=current_label,
            current_observation=current_observation, actions=self.actions_section(admissible),
        )
        if fmt == "block":
            intro = self.t("history_intro_reference.txt" if with_reference else "history_intro.txt")
            text = fill(self.t("actor_block.txt"), **common, step_count=step_count, history_intro=intro,
                        current_step=step_count + 1, history=render_block(history))
            return [{"role": "user", "content": text}]
        hint = " and the admissible actions" if admissible is not None else ""
        system = fill(self.t("actor_system.txt"), **common, actions_hint=hint)
        current = fill(self.t("actor_user_current.txt"), **common).rstrip("\n")
        parts = chat_messages(history)
        msgs = [{"role": "system", "content": system}] + [m for m, _ in parts]
        if parts and parts[-1][0]["role"] == "user" and not parts[-1][1]:
            msgs[-1] = {"role": "user", "content": msgs[-1]["content"] + "\n" + current}
        else:  # after an action, or after the reference block's own message (Appendix F.2)
            msgs.append({"role": "user", "content": current})
        return msgs

    # -- review ------------------------------------------------------------------------
    def review_messages(self, *, env: str, task: str, history: Sequence[Segment], action: str,
                        observation: str) -> list[Message]:
        """Appendix G.2: raw history through the latest action, the action and its outcome."""
        user = fill(self.t("experience_review_user.txt"), environment=self.environment(env), task=task,
                    history=render_block(history), action=action, observation=observation)
        return [{"role": "system", "content": self.t("experience_review_system.txt")},
                {"role": "user", "content": user}]


def parse_review(value: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """``("CALIBRATE", text)``, ``("NOUPDATE", None)`` or ``("INVALID", None)``.

    Only the two outputs of Appendix G.2 are valid: NOUPDATE with a null experience, and
    CALIBRATE with a non-empty experience string; anything else is invalid (and, like
    NOUPDATE, leaves the history unchanged, Appendix B.1).
    """
    if not value:
        return "INVALID", None
    decision = value.get("decision")
    exp = value.get("experience")
    if decision == "NOUPDATE" and exp is None:
        return "NOUPDATE", None
    if decision == "CALIBRATE" and isinstance(exp, str) and exp.strip():
        return "CALIBRATE", " ".join(exp.split())
    return "INVALID", None
