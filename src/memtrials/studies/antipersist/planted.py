"""The planted synthesizer and actor of the anti-persistence study's known-answer runs (issue 38).

**Modes by cluster.**  The planted synthesizer answers a guidance call (``antipersist_synthesis``)
with one line naming the mode it was asked for, read from the mode's system prompt
(:data:`MODE_PHRASES`, phrases of ``config/prompts/memory/guidance_<mode>.md``): ``- Planted
guidance (mode imitation).``  The planted actor reads its own task's cluster (the planted
world's task type, named by its goal sentence) and the mode of the guidance it is shown (none when it
is shown earlier attempts without guidance, or nothing) and takes the right action with

    p = clip(base + effects[mode][cluster] - flaw_effect * [a flawed rule is shown], 0, 1)

so the best mode of every cluster is known (:func:`best_modes`).  One uniform draw per episode
(the request's seed and the task) decides every step, so an episode succeeds with probability
exactly ``p`` on a world won by the right actions and lost by wrong ones.

**Planted errors in abstractions.**  The planted abstraction writer (``abstraction_synthesis``)
writes one rule per episode; it is *flawed* (its text says ``(flawed rule)``) with probability
``flaw.after_failure`` when the episode it reads failed and ``flaw.after_success`` when it
succeeded.  A flawed rule shown to the actor lowers ``p`` by ``flaw.effect``, so an episode
served a flawed rule fails more often and writes a flawed rule more often: the error
propagates to descendants, and the reproduction quantity ``P(flawed child | served a flawed
parent) - P(flawed child | not)`` is ``(after_failure - after_success) * effect``
(:func:`flaw_reproduction`, exact while ``p`` stays inside [0, 1] on both sides).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from memtrials.envs.planted.agent import act, episode_uniform, uniform

MODES = ("none", "imitation", "strategic", "corrective")
#: A phrase of each synthesis mode's system prompt (``config/prompts/memory/guidance_<mode>.md``;
#: a test checks each occurs in its file and in no other).
MODE_PHRASES = {"imitation": "Extract the action patterns", "strategic": "Organise what they show into a plan",
                "corrective": "Write avoidance rules"}
GUIDANCE = re.compile(r"Planted guidance \(mode (\w+)\)")
FLAWED = "(flawed rule)"


@dataclass(frozen=True)
class Flaw:
    effect: float
    after_failure: float
    after_success: float


@dataclass(frozen=True)
class AntiPlant:
    """The declared world: base chance, mode effect per cluster, the planted abstraction error."""

    base: float
    effects: Mapping[str, Mapping[str, float]]  # mode -> cluster -> amount
    flaw: Flaw
    clusters: Mapping[str, str]  # cluster -> the task text that names it (the planted world: a type's goal)

    def __post_init__(self) -> None:
        if set(self.effects) != set(MODES):
            raise ValueError(f"planted antipersist: effects must name every mode {list(MODES)}, got {sorted(self.effects)}")
        clusters = {m: set(v) for m, v in self.effects.items()}
        if len({frozenset(c) for c in clusters.values()}) != 1:
            raise ValueError(f"planted antipersist: every mode needs the same clusters, got {clusters}")
        for name, v in (("flaw.after_failure", self.flaw.after_failure), ("flaw.after_success", self.flaw.after_success)):
            if not 0 <= v <= 1:
                raise ValueError(f"planted antipersist: {name} {v} must lie in [0, 1]")
        if set(self.clusters) != set(self.effects["none"]):
            raise ValueError(f"planted antipersist: effects name clusters {sorted(self.effects['none'])}, the world has "
                             f"{sorted(self.clusters)}; give one amount per cluster")

    @classmethod
    def of(cls, params: Mapping[str, Any], clusters: Mapping[str, str] | None = None) -> "AntiPlant":
        """From the endpoint's ``params`` (``base``, ``effects: {mode: {cluster: amount}}``, ``flaw:
        {effect, after_failure, after_success}``); ``clusters`` default to the planted world's task
        types, each named by its goal sentence."""
        if clusters is None:
            from memtrials.envs.planted.world import TASK_TYPES

            clusters = {t: w.goal for t, w in TASK_TYPES.items()}
        try:
            f = params["flaw"]
            return cls(float(params["base"]),
                       {str(m): {str(c): float(a) for c, a in v.items()} for m, v in params["effects"].items()},
                       Flaw(float(f["effect"]), float(f["after_failure"]), float(f["after_success"])), dict(clusters))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"planted antipersist params: {exc!r}; expected base, effects: {{mode: {{cluster: amount}}}}, "
                             "flaw: {effect, after_failure, after_success}") from exc

    @property
    def cluster_names(self) -> list[str]:
        return sorted(self.effects["none"])

    def chance(self, mode: str, cluster: str, flawed: bool = False) -> float:
        p = self.base + self.effects[mode].get(cluster, 0.0) - (self.flaw.effect if flawed else 0.0)
        return min(1.0, max(0.0, p))

    def cluster_of(self, task: str) -> str | None:
        """The cluster whose text the task text holds (``None``: none does)."""
        hits = [c for c, text in self.clusters.items() if text in task]
        return hits[0] if len(hits) == 1 else None


# -- truth ---------------------------------------------------------------------------------

def best_modes(plant: AntiPlant) -> dict[str, str]:
    """Each cluster's best mode (ties: the earlier of :data:`MODES`)."""
    return {c: max(MODES, key=lambda m: (plant.effects[m][c], -MODES.index(m))) for c in plant.cluster_names}


def flaw_reproduction(plant: AntiPlant) -> float:
    """P(flawed child | served a flawed parent) - P(flawed child | not), from the declared rates.

    Exact when the rule-serving designs' chance does not depend on the cluster (``effects.none``
    equal over clusters), so exposure cannot stand in for a cluster; refused otherwise."""
    if len(set(plant.effects["none"].values())) > 1:
        raise ValueError("planted antipersist: flaw reproduction has a closed form only when effects.none is "
                         f"the same for every cluster, got {dict(plant.effects['none'])}; make them equal")
    return (plant.flaw.after_failure - plant.flaw.after_success) * plant.flaw.effect


# -- the policy ----------------------------------------------------------------------------

def _text(body: Mapping[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])


def task_of(body: Mapping[str, Any]) -> str:
    """The actor's own task: the text after the last ``Your task is to:`` of the request."""
    found = re.findall(r"Your task is to: ?([^\n]*)", _text(body))
    return found[-1].strip() if found else ""


def shown(body: Mapping[str, Any]) -> tuple[str, bool]:
    """The mode of the guidance the actor is shown (``none`` without guidance) and whether a flawed rule is."""
    before_task = _text(body).rsplit("Your task is to:", 1)[0]
    modes = GUIDANCE.findall(before_task)
    return (modes[-1] if modes and modes[-1] in MODES else "none"), FLAWED in before_task


def guidance_reply(body: Mapping[str, Any]) -> str:
    system = next((str(m.get("content", "")) for m in body.get("messages") or [] if m.get("role") == "system"), "")
    mode = next((m for m, phrase in MODE_PHRASES.items() if phrase in system), "none")
    return f"- Planted guidance (mode {mode})."


def rule_reply(plant: AntiPlant, body: Mapping[str, Any]) -> str:
    text = _text(body)
    won = re.search(r"^Outcome: (\w+)", text, flags=re.MULTILINE)
    failed = not (won and won.group(1).startswith("succeeded"))
    task = re.search(r"^Task: (.*)$", text, flags=re.MULTILINE)
    key = task.group(1) if task else text
    rate = plant.flaw.after_failure if failed else plant.flaw.after_success
    flawed = uniform(body, "flaw") < rate
    code = hashlib.sha256(key.encode()).hexdigest()[:8]
    rule = f"On tasks like {code}, check the goal first" + (f" {FLAWED}." if flawed else ".")
    return json.dumps({"rules": [rule]})


def role_of(body: Mapping[str, Any]) -> str:
    fmt = body.get("response_format") or {}
    props = ((fmt.get("json_schema") or {}).get("schema") or {}).get("properties") or {}
    if "rules" in props:
        return "abstraction"
    if "Write the guidance for the current task." in _text(body):
        return "guidance"
    return "actor"


#: ``act(body, right) -> str``: the planted world's actor step (right or a wrong action).
ActStep = Callable[[Mapping[str, Any], bool], str]


def actor_reply(plant: AntiPlant, body: Mapping[str, Any], act: ActStep) -> str:
    task = task_of(body)
    mode, flawed = shown(body)
    cluster = plant.cluster_of(task)
    p = plant.chance(mode, cluster, flawed) if cluster is not None else plant.base
    return act(body, episode_uniform(body, "antipersist") < p)


def make_policy(plant: AntiPlant, act: ActStep) -> Callable[[Mapping[str, Any]], str]:
    """The planted endpoint's reply policy ``(body) -> str`` for every role of the study."""

    def reply(body: Mapping[str, Any]) -> str:
        role = role_of(body)
        if role == "abstraction":
            return rule_reply(plant, body)
        if role == "guidance":
            return guidance_reply(body)
        return actor_reply(plant, body, act)

    return reply


def policy(**params: Any) -> Callable[[Mapping[str, Any]], str]:
    """The factory a planted registry entry names (``planted.policy:
    memtrials.studies.antipersist.planted:policy``): ``params`` as :meth:`AntiPlant.of` reads them."""
    return make_policy(AntiPlant.of(params), act)
