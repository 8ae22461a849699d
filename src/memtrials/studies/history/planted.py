"""The history study's planted agent (registry entry ``planted-history``; issue 38).

A declared policy over the planted world (:mod:`memtrials.envs.planted`): the chance of the
right action depends on the history view its prompt shows, and after a failed action it
repeats that action at a planted rate that causal labels lower.  The view is read from the
prompt text as rendered (block format; :func:`read_prompt`), never from a side channel:

* ``check``: the reminder ``[History caution]`` is in the prompt (every step);
* ``causal``: an entry is labelled ``Initial Observation`` / ``Outcome of Action``;
* ``experience``: an ``[Experience derived from ...]`` line;
* ``obsonly``: entries without actions;
* ``shuffled``: an entry's action contradicts the observation that follows it (a failure
  quotes the action it answers; an acceptance follows the action naming the code shown);
* ``recent3``: the first entry shown is not entry 1;
* otherwise (and with no history at all) ``raw``.

At each actor prompt, with ``v`` the view read, ``failed`` the action the current
observation says failed (``Nothing happens: '<action>' ...``) or none:

* after a failure, with probability ``repeat[causal if v == causal else base]`` the failed
  action again; otherwise
* the right action (the one naming the current code) with probability ``p_right[v]``, else
  one of the other wrong actions, uniformly (never the failed one).

Review requests (the Experience condition's G.2 review) get a CALIBRATE reply.  Every draw
is :func:`memtrials.envs.planted.agent.uniform` of the request, so a rerun replays.  The truth
of every estimand follows from these declared numbers alone
(:mod:`memtrials.studies.history.planted_truth`); this module's source is part of the
endpoint's cache identity.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from memtrials.envs.planted.agent import options, pick, prompt_text, reply, uniform
from memtrials.envs.planted.world import current_code, right_option

VIEW_CLASSES: tuple[str, ...] = ("raw", "recent3", "obsonly", "shuffled", "causal", "experience", "check")
"""What the policy can tell apart (both shuffles read as ``shuffled``)."""
REVIEW_MARK = "You are calibrating your own prior interaction history"
REVIEW_REPLY = {"decision": "CALIBRATE",
                "experience": "Only the action that names the code shown in the observation advances the task."}
_ENTRY = re.compile(r"^\[(?P<ol>Initial Observation \d+|Outcome of Action \d+|Observation (?P<i>\d+)): '(?P<obs>.*?)'"
                    r"(?:, Action \d+: '(?P<act>.*)')?\]$")
_CURRENT = re.compile(r"Current observation(?: \(Outcome of Action \d+\))?: (.*)$", re.MULTILINE)
_FAILED = re.compile(r"^Nothing happens: '(.*)' is not right here\.")


@dataclass(frozen=True)
class Prompt:
    """What the policy reads from an actor prompt."""

    view: str
    current: str
    failed: str | None
    entries: int


def _incoherent(entries: list[tuple[str, str | None]], current: str) -> bool:
    """Whether an entry's shown action contradicts the observation that follows it."""
    nexts = [o for o, _ in entries[1:]] + [current]
    for (obs, act), nxt in zip(entries, nexts):
        if act is None:
            continue
        failed = _FAILED.match(nxt)
        if failed is not None and failed.group(1) != act:
            return True
        if nxt.startswith("Accepted") and right_option(current_code(obs), [act]) is None:
            return True
    return False


def read_prompt(text: str) -> Prompt:
    """The view class, current observation and failed action an actor prompt shows."""
    lines = text.splitlines()
    entries: list[tuple[str, str | None]] = []
    labels, first = [], None
    for line in lines:
        m = _ENTRY.match(line.strip())
        if m:
            entries.append((m.group("obs"), m.group("act")))
            labels.append(m.group("ol"))
            if first is None and m.group("i"):
                first = int(m.group("i"))
    cur = _CURRENT.findall(text)
    current = cur[-1] if cur else ""
    failed = _FAILED.match(current)
    if "[History caution]" in text:
        view = "check"
    elif not entries:
        view = "raw"
    elif any(not lab.startswith("Observation") for lab in labels):
        view = "causal"
    elif "[Experience derived from" in text:
        view = "experience"
    elif all(a is None for _, a in entries):
        view = "obsonly"
    elif _incoherent(entries, current):
        view = "shuffled"
    elif first is not None and first > 1:
        view = "recent3"
    else:
        view = "raw"
    return Prompt(view, current, failed.group(1) if failed else None, len(entries))


def _check_params(p_right: Mapping[str, float], repeat: Mapping[str, float]) -> None:
    missing = sorted(set(VIEW_CLASSES) - set(p_right))
    if missing or sorted(repeat) != ["base", "causal"]:
        raise ValueError(f"planted history policy: p_right needs {list(VIEW_CLASSES)} (missing {missing}); "
                         f"repeat needs base and causal (got {sorted(repeat)})")
    for name, v in [*p_right.items(), *repeat.items()]:
        if not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"planted history policy: {name} = {v!r} is not a probability")


def act(body: Mapping[str, Any], p_right: Mapping[str, float], repeat: Mapping[str, float]) -> str:
    """The action for one actor request (module docstring)."""
    opts = options(body)
    seen = read_prompt(prompt_text(body))
    right = right_option(current_code(seen.current), opts)
    if seen.failed is not None and seen.failed in opts:
        rate = float(repeat["causal" if seen.view == "causal" else "base"])
        if uniform(body, "repeat") < rate:
            return reply(body, seen.failed)
        others = [o for o in opts if o != seen.failed]
        return reply(body, pick(body, float(p_right[seen.view]), others, right))
    return reply(body, pick(body, float(p_right[seen.view]), opts, right))


def policy(p_right: Mapping[str, float], repeat: Mapping[str, float]) -> Callable[[Mapping[str, Any]], str]:
    """The planted policy with its declared numbers (``planted.params`` in ``config/models.yaml``)."""
    _check_params(p_right, repeat)
    p_right, repeat = dict(p_right), dict(repeat)

    def answer(body: Mapping[str, Any]) -> str:
        if REVIEW_MARK in prompt_text(body):
            return json.dumps(REVIEW_REPLY)
        return act(body, p_right, repeat)

    return answer
