"""The calibrator's planted agent and its known answers (issue 38).

One policy (registry entry ``planted-calibrator``) answers every role of the label chain
(section 6.1) from what its prompt shows, at declared rates (:class:`PlantedCalibrator`):

- **generator** (the G.2 review): CALIBRATE with probability ``calibrate``, its experience
  E of kind *helpful* with probability ``helpful`` else *harmful* (two fixed sentences,
  :data:`EXPERIENCES`); otherwise NOUPDATE;
- **screen** (the judge's content screen): flags the candidate unsupported with probability
  ``screen[kind].unsupported`` and, in an independent draw, as restating the observation with
  ``screen[kind].restates``;
- **recipient actor** (the block-format actor prompt, with or without E): the planted world's
  right action (:func:`memtrials.envs.planted.world.right_option`) with probability
  ``actor[none | helpful | harmful]`` by the E its prompt holds, else a wrong one;
- **comparison** (the judge, blind, once per A/B order): when exactly one candidate is the
  right action it names that one with probability ``judge.right`` and the other with
  ``judge.wrong``, else tie; with no right candidate it answers tie.

So per compared pair ``win = p_k (1 - p_0) r^2 + (1 - p_k) p_0 w^2`` and
``loss = (1 - p_k) p_0 r^2 + p_k (1 - p_0) w^2`` (the two orders are independent draws), and
the label rule's target follows by exact enumeration over the recipients' outcomes
(:func:`truth`).  Draws use :func:`memtrials.envs.planted.agent.uniform`: a function of the
request, so a rerun replays from the cache byte for byte.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from memtrials.envs.planted.agent import options, prompt_text, reply, uniform
from memtrials.envs.planted.world import current_code, right_option
from memtrials.studies.history.calibrator.labels import target

KINDS = ("helpful", "harmful")
EXPERIENCES = {
    "helpful": "The returned observation names the code that the next step needs, so the cue in the latest "
               "observation outranks every earlier one.",
    "harmful": "The returned observation may be stale, so the previous action is the safer guide to the next "
               "step than the latest cue.",
}
_REVIEW = "You are calibrating your own prior interaction history"
_SCREEN = "You check a candidate experience"
_COMPARE = "You compare two candidate next actions"


@dataclass(frozen=True)
class PlantedCalibrator:
    calibrate: float
    helpful: float
    screen: Mapping[str, Mapping[str, float]]   # kind -> {unsupported, restates}
    actor: Mapping[str, float]                  # none | helpful | harmful -> P(right action)
    judge: Mapping[str, float]                  # right | wrong -> P(names it), per order
    seed: int = 0

    @classmethod
    def from_params(cls, params: Mapping[str, Any], where: str = "planted.params") -> "PlantedCalibrator":
        need = {"calibrate", "helpful", "screen", "actor", "judge"}
        extra, missing = set(params) - need - {"seed"}, need - set(params)
        if extra or missing:
            raise ValueError(f"{where}: unknown keys {sorted(extra)}, missing keys {sorted(missing)}; the planted "
                             f"calibrator takes {sorted(need | {'seed'})} (config/models.yaml, planted-calibrator)")
        _rate(params["calibrate"], f"{where}.calibrate")
        _rate(params["helpful"], f"{where}.helpful")
        for k in KINDS:
            for f in ("unsupported", "restates"):
                _rate((params["screen"].get(k) or {}).get(f), f"{where}.screen.{k}.{f}")
        for k in ("none", *KINDS):
            _rate(params["actor"].get(k), f"{where}.actor.{k}")
        for k in ("right", "wrong"):
            _rate(params["judge"].get(k), f"{where}.judge.{k}")
        if params["judge"]["right"] + params["judge"]["wrong"] > 1.0:
            raise ValueError(f"{where}.judge: right + wrong exceeds 1 (the rest is the tie's)")
        return cls(float(params["calibrate"]), float(params["helpful"]), params["screen"], params["actor"],
                   params["judge"], int(params.get("seed", 0)))


def _rate(x: Any, where: str) -> float:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not 0.0 <= float(x) <= 1.0:
        raise ValueError(f"{where}: {x!r} is not a rate; give a number in [0, 1]")
    return float(x)


def experience_kind(text: str | None) -> str | None:
    """The planted kind of an experience (or of the E a prompt holds); ``None`` for none."""
    for k, e in EXPERIENCES.items():
        if text and e in text:
            return k
    return None


# ----- the policy -------------------------------------------------------------------------
def respond(p: PlantedCalibrator, body: Mapping[str, Any]) -> str:
    text = prompt_text(body)
    if _REVIEW in text:
        if uniform(body, p.seed, "calibrate") >= p.calibrate:
            return json.dumps({"decision": "NOUPDATE", "experience": None})
        kind = "helpful" if uniform(body, p.seed, "kind") < p.helpful else "harmful"
        return json.dumps({"decision": "CALIBRATE", "experience": EXPERIENCES[kind]})
    if _SCREEN in text:
        kind = experience_kind(text.rsplit("Candidate experience:", 1)[-1]) or "harmful"
        s = p.screen[kind]
        return json.dumps({"unsupported": uniform(body, p.seed, "unsupported") < s["unsupported"],
                           "restates_observation": uniform(body, p.seed, "restates") < s["restates"]})
    if _COMPARE in text:
        head, _, cands = text.rpartition("Candidate action A:")
        a, _, b = cands.partition("Candidate action B:")
        a, b = a.strip(), b.split("Which candidate", 1)[0].strip()
        right = right_option(current_code(head), [a, b])
        u = uniform(body, p.seed, "judge")
        if right is None:
            return json.dumps({"better": "tie"})
        names = "A" if right == a else "B"
        if u < p.judge["right"]:
            return json.dumps({"better": names})
        if u < p.judge["right"] + p.judge["wrong"]:
            return json.dumps({"better": "B" if names == "A" else "A"})
        return json.dumps({"better": "tie"})
    opts = options(body)  # a recipient (or source) actor
    kind = experience_kind(text) or "none"
    right = right_option(current_code(text), opts)
    wrong = [o for o in opts if o != right]
    if not opts:
        return reply(body, "look")
    if right is not None and (uniform(body, p.seed, "right") < p.actor[kind] or not wrong):
        return reply(body, right)
    pool = wrong if right is not None else opts
    return reply(body, pool[int(uniform(body, p.seed, "which") * len(pool))])


def policy(**params: Any) -> Callable[[Mapping[str, Any]], str]:
    """``planted: {policy: "memtrials.studies.history.calibrator.planted:policy", params: {...}}``."""
    p = PlantedCalibrator.from_params(params)
    return lambda body: respond(p, body)


# ----- the truth (from the declared rates only) -------------------------------------------
def pair_rates(p: PlantedCalibrator, kind: str) -> tuple[float, float]:
    """(P(win), P(loss)) of one recipient's pair for an experience of ``kind``."""
    pk, p0 = float(p.actor[kind]), float(p.actor["none"])
    r, w = float(p.judge["right"]), float(p.judge["wrong"])
    return pk * (1 - p0) * r * r + (1 - pk) * p0 * w * w, (1 - pk) * p0 * r * r + pk * (1 - p0) * w * w


def calibrate_given(p: PlantedCalibrator, kind: str, recipients: int) -> float:
    """P(target CALIBRATE | a screened candidate of ``kind``), by exact enumeration of the
    recipients' outcomes (each win, loss or tie) under the label rule."""
    win, loss = pair_rates(p, kind)
    prob = {"win": win, "loss": loss, "tie": 1.0 - win - loss}
    total = 0.0
    for outs in itertools.product(("win", "loss", "tie"), repeat=recipients):
        if target(list(outs)) == "CALIBRATE":
            pr = 1.0
            for o in outs:
                pr *= prob[o]
            total += pr
    return total


def truth(p: PlantedCalibrator, recipients: int) -> dict[str, float]:
    """The planted value of every quantity of the known-answer table (:mod:`.known`)."""
    share = {"helpful": p.helpful, "harmful": 1.0 - p.helpful}
    out: dict[str, float] = {"generator CALIBRATE": p.calibrate, "helpful share of E": p.helpful}
    full = screen_only = 0.0
    for k in KINDS:
        s = p.screen[k]
        passed = (1 - float(s["unsupported"])) * (1 - float(s["restates"]))
        win, loss = pair_rates(p, k)
        cal = calibrate_given(p, k, recipients)
        out[f"screen pass | {k}"] = passed
        out[f"win | {k}"], out[f"loss | {k}"] = win, loss
        out[f"q(E) | {k}"] = recipients * (win - loss)
        out[f"target CALIBRATE | screened {k}"] = cal
        full += p.calibrate * share[k] * passed * cal
        screen_only += p.calibrate * share[k] * passed
    out["target CALIBRATE (full)"] = full
    out["target CALIBRATE (screen_only)"] = screen_only
    return out
