"""What ACE's Reflector reads from a finished episode besides its trajectory: the lesson
ids it was served, AppWorld's unit-test results and the feedback text (``pass_fail``,
``unit_tests`` or ``reward``) for :class:`memtrials.memory.ace.ACEPlaybook`.  AutoRefine
(:mod:`memtrials.memory.autorefine`) reads the served ids the same way.
"""

from __future__ import annotations

import json
from typing import Any


def served_ids(episode: Any) -> list[str]:
    """The lesson ids an episode was shown, in order of first appearance over its steps."""
    out: list[str] = []
    for st in episode.steps:
        raw = st.get("memory_ids")
        for i in (json.loads(raw) if isinstance(raw, str) else raw or []):
            if i not in out:
                out.append(i)
    return out


def unit_tests(episode: Any) -> list[dict[str, Any]] | None:
    """AppWorld's per-test results of an episode, or None when it carries none.

    AppWorld reports them in the final observation's ``info["tests"]`` (a list of
    ``{requirement, passed, trace}``, :mod:`memtrials.envs.appworld.env`); an episode carries
    them as ``final_info["tests"]`` (the runner keeps the last observation's info), or as
    ``tests`` (a list or its JSON) in its summary or in its last step row.
    """
    places = [(getattr(episode, "final_info", None) or {}).get("tests"), episode.summary.get("tests")] + (
        [episode.steps[-1].get("tests")] if episode.steps else [])
    for value in places:
        if isinstance(value, str):
            value = json.loads(value)
        if isinstance(value, list):
            return [dict(t) for t in value]
    return None


def feedback_text(episode: Any, mode: str, trace_chars: int = 300) -> str:
    """What the Reflector is told about the outcome: ``pass_fail`` (completed or not),
    ``reward`` (that and the episode's final reward in [0, 1], ``final_score``: partial
    credit where the environment gives it) or ``unit_tests``."""
    s = episode.summary
    outcome = "The task was completed successfully." if s["won"] else "The task was not completed."
    if mode == "pass_fail":
        return outcome
    if mode == "reward":
        return f"{outcome} Reward: {float(s['final_score']):.2f} (1.00 is full success)."
    tests = unit_tests(episode)
    if tests is None:
        raise ValueError(
            f"ACE feedback 'unit_tests': episode {s.get('episode_id')!r} carries no unit-test results "
            "(looked for 'tests' in its summary and its last step row). Fix: record AppWorld's final "
            "obs.info['tests'] with the episode, or use feedback 'pass_fail'.")
    passed = sum(bool(t["passed"]) for t in tests)
    lines = [f"{outcome} Unit tests: {passed} of {len(tests)} passed."]
    for t in tests:
        line = f"- {'PASS' if t['passed'] else 'FAIL'}: {t['requirement']}"
        trace = " ".join(str(t.get("trace") or "").split())
        if not t["passed"] and trace:
            line += f" ({trace[:trace_chars]})"
        lines.append(line)
    return "\n".join(lines)
