"""The luck study's planted agent and its known answers (issue 38).

A planted endpoint answers both roles of the study from what its prompt shows, at
declared rates (:class:`PlantedLuck`, the registry entry's ``planted.params``):

- **writer** (a Appendix A request): it reads the instruction (RB, RBD or N, from the
  system text), the decision (good: the tool used is the one the run log shows as more
  reliable) and the outcome (the observation of step 2) and writes one memory item that
  recommends *switching* away from the tool used with probability
  ``switch[instruction][decision][outcome]``, else *keeping* it;
- **reader** (an Appendix B request): it classifies the memory item it holds (a lesson
  recommending the worse tool, a lesson recommending the better tool, the irrelevant
  item, the directive) and names the worse tool with probability ``reader[kind]``.

Each draw is :func:`memtrials.envs.planted.agent.uniform` of the request (its messages and
sample seed) and the policy's seed, so a request always gets the same reply (from the
server as from the cache) and the draws of different requests are independent.  The truth of every registered
contrast follows from the declared rates alone (:func:`cell_truth`,
:func:`contrast_truth`): the expected Y of each reader cell is a mixture over the
lesson the cell holds, and every contrast is linear in the cells.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from memtrials.envs.planted.agent import uniform
from memtrials.studies.luck.contrasts import CONTRASTS, Cell
from memtrials.studies.luck.design import ARMS, DECISIONS, INSTRUCTIONS, OUTCOMES, arm_lesson

READER_KINDS = ("recommends_worse", "recommends_better", "irrelevant", "directive")
ROLE_WRITER, ROLE_READER = "writer", "reader"

# what the prompts show (config/prompts/luck/*): the run log, the used tool, the outcome
_RUN_LOG = re.compile(r"Run log \([^)]*\): (\S+) succeeded in (\d+) of (\d+); (\S+) succeeded in (\d+) of (\d+)\.")
_USED = re.compile(r"^Action: (?!read_run_log\(\)|finish\(\))(\S+)\(\)\s*$", re.MULTILINE)
_FAILED = "this run allows no retry"
_RBD_MARK = "judge whether the agent's decision was sound"
_N_MARK = "how an agent attempted the task**"
_READER_MARK = "Which tool will you call first for this run?"
_DIRECTIVE = re.compile(r"## Title Use (\S+) first\n## Description Applies to every run of this task\.")
_RECOMMENDS = re.compile(r"## Content Call (\S+) first on the next run\.")


@dataclass(frozen=True)
class PlantedLuck:
    """Declared rates of the planted luck agent (every key required; see
    ``config/models.yaml``, entry ``planted-luck``)."""

    switch: Mapping[str, Mapping[str, Mapping[str, float]]]  # instruction -> decision -> outcome -> rate
    reader: Mapping[str, float]  # memory kind -> rate of naming the worse tool
    seed: int = 0

    @classmethod
    def from_params(cls, params: Mapping[str, Any], where: str = "planted.params") -> "PlantedLuck":
        known = {"switch", "reader", "seed"}
        extra = set(params) - known
        missing = {"switch", "reader"} - set(params)
        if extra or missing:
            raise ValueError(f"{where}: unknown keys {sorted(extra)}, missing keys {sorted(missing)}; "
                             f"the planted luck agent takes {sorted(known)} (config/models.yaml, planted-luck)")
        sw, rd = params["switch"], params["reader"]
        for i in INSTRUCTIONS:
            for d in DECISIONS:
                for o in OUTCOMES:
                    try:
                        _rate(sw[i][d][o], f"{where}.switch.{i}.{d}.{o}")
                    except (KeyError, TypeError):
                        raise ValueError(f"{where}.switch.{i}.{d}.{o}: missing; give a rate in [0, 1] for every "
                                         f"instruction {INSTRUCTIONS} x decision {DECISIONS} x outcome {OUTCOMES}")
        for k in READER_KINDS:
            if k not in rd:
                raise ValueError(f"{where}.reader.{k}: missing; give a rate in [0, 1] for each of {READER_KINDS}")
            _rate(rd[k], f"{where}.reader.{k}")
        return cls(switch=sw, reader=dict(rd), seed=int(params.get("seed", 0)))


def _rate(x: Any, where: str) -> float:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not 0.0 <= float(x) <= 1.0:
        raise ValueError(f"{where}: {x!r} is not a rate; give a number in [0, 1]")
    return float(x)


# ----- the truth (from the declared rates only) -------------------------------------------
def recommends_worse(p: PlantedLuck, instruction: str, decision: str, outcome: str) -> float:
    """Probability that the lesson written after (decision, outcome) recommends the worse
    tool: a switch away from the better tool (good decision) or keeping the worse one (bad)."""
    s = float(p.switch[instruction][decision][outcome])
    return s if decision == "good" else 1.0 - s


def cell_truth(p: PlantedLuck) -> dict[Cell, float]:
    """E[Y] of every reader cell (decision, outcome, arm): Y = 1 names the worse tool."""
    r = p.reader
    out: dict[Cell, float] = {}
    for d in DECISIONS:
        for o in OUTCOMES:
            for a in ARMS:
                src = arm_lesson(a, o)
                if src is None:
                    out[(d, o, a)] = float(r["irrelevant"] if a == "NEUTRAL" else r["directive"])
                    continue
                q = recommends_worse(p, src[0], d, src[1])
                out[(d, o, a)] = q * r["recommends_worse"] + (1.0 - q) * r["recommends_better"]
    return out


def contrast_truth(p: PlantedLuck) -> dict[str, float]:
    """The planted value of every registered contrast (``contrasts.CONTRASTS``)."""
    ey = cell_truth(p)
    return {c.name: float(sum(coef * ey[cell] for cell, coef in c.terms)) for c in CONTRASTS}


# ----- the policy -------------------------------------------------------------------------
def _texts(body: Mapping[str, Any]) -> tuple[str, str]:
    msgs = body.get("messages") or []
    system = "\n".join(str(m.get("content", "")) for m in msgs if m.get("role") == "system")
    user = "\n".join(str(m.get("content", "")) for m in msgs if m.get("role") == "user")
    return system, user


def run_log(text: str) -> tuple[str, str]:
    """(better tool, worse tool) as the run log in ``text`` shows them."""
    m = _RUN_LOG.search(text)
    if not m:
        raise ValueError("planted luck agent: the prompt shows no run log; is this a luck-study request?")
    t1, s1, n1, t2, s2, n2 = m.groups()
    r1, r2 = int(s1) / int(n1), int(s2) / int(n2)
    return (t1, t2) if r1 > r2 else (t2, t1)


def read_writer_request(system: str, user: str) -> tuple[str, str, str, str, tuple[str, str]]:
    """(instruction, decision, outcome, tool used, (better, worse)) of a writer request."""
    instruction = "RBD" if _RBD_MARK in system else "N" if _N_MARK in system else "RB"
    better, worse = run_log(user)
    used = _USED.findall(user)
    if len(used) != 1 or used[0] not in (better, worse):
        raise ValueError(f"planted luck agent: cannot tell the tool used from the trajectory ({used})")
    decision = "good" if used[0] == better else "bad"
    outcome = "failure" if _FAILED in user else "success"
    return instruction, decision, outcome, used[0], (better, worse)


def lesson_text(recommended: str, used: str, outcome: str) -> str:
    """The planted writer's memory item (format of Appendix A's output)."""
    verb = "Keep" if recommended == used else "Switch to"
    what = "succeeded" if outcome == "success" else "failed"
    return (f"# Memory Item 1\n## Title {verb} {recommended}\n"
            f"## Description Use when choosing the first tool for this task after {used} {what}.\n"
            f"## Content Call {recommended} first on the next run.")


def memory_kind(user: str, better: str, worse: str) -> str:
    """Which of :data:`READER_KINDS` the reader request's memory item is."""
    memory = user.split("Memory items saved from earlier runs of this task:", 1)[-1]
    d = _DIRECTIVE.search(memory)
    if d:
        return "directive"
    m = _RECOMMENDS.search(memory)
    if m and m.group(1) in (better, worse):
        return "recommends_worse" if m.group(1) == worse else "recommends_better"
    return "irrelevant"


def reply(p: PlantedLuck, body: Mapping[str, Any]) -> str:
    """The planted agent's reply to one luck-study request."""
    system, user = _texts(body)
    if _READER_MARK in user:
        better, worse = run_log(user)
        kind = memory_kind(user, better, worse)
        worse_named = uniform(body, p.seed, ROLE_READER) < float(p.reader[kind])
        return json.dumps({"first_tool": worse if worse_named else better, "reason": f"planted ({kind})"})
    instruction, decision, outcome, used, (better, worse) = read_writer_request(system, user)
    switch = uniform(body, p.seed, ROLE_WRITER) < float(p.switch[instruction][decision][outcome])
    other = worse if used == better else better
    return lesson_text(other if switch else used, used, outcome)


def policy(**params: Any) -> Callable[[Mapping[str, Any]], str]:
    """The ``(body) -> str`` policy of a registry entry ``planted: {policy:
    "memtrials.studies.luck.planted:policy", params: {...}}``."""
    p = PlantedLuck.from_params(params)
    return lambda body: reply(p, body)
