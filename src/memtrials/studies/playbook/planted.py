"""The planted Reflector, Curator and actor of the playbook study's known-answer runs (issue 38).

Every lesson the planted Curator writes comes from a declared **lesson bank**: a code, a text
that names the code (``... (tip H1)``) and a hidden effect on the actor's chance of the right
action (helpful > 0, harmful < 0, neutral 0), plus one planted **interaction** (an extra
amount when two named lessons are served together).  The planted actor reads the codes of
the lessons its prompt shows (the lesson texts themselves, no side channel) and takes the
right action with probability

    p(S) = clip(base + sum_{c in S} effect_c + interaction [a in S and b in S], 0, 1)

One uniform draw per episode (from the request's sampling seed, the same at every step of an
episode) decides the whole episode: ``u < p(S)`` right at every step, else a wrong action at
every step; so an episode's success has probability exactly ``p(S)`` on a world whose task is
won by the right actions and lost by wrong ones.  The truth of every estimand follows from
``p`` alone (:mod:`.planted_truth`), never from the runs.

The planted Curator adds, per call, the next ``per_call`` bank lessons the playbook does not
hold yet, the ``first`` ones before the others, each group in an order drawn from the request
(which holds the batch's attempts, so growth runs with different task orders grow different
playbooks); the Reflector tags every shown lesson ``neutral``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from memtrials.envs.planted.agent import act, episode_uniform, uniform

#: A lesson code in a lesson's text: ``(tip H1)``.
CODE = re.compile(r"\(tip ([A-Z][0-9]+)\)")


@dataclass(frozen=True)
class Plant:
    """The declared world of a known-answer run: base chance, effect per lesson code, one interaction."""

    base: float
    effects: Mapping[str, float]
    texts: Mapping[str, str]
    interaction: tuple[str, str, float] | None = None
    per_call: int = 2
    first: tuple[str, ...] = ()  # codes the Curator writes before any other (in a drawn order too)

    def __post_init__(self) -> None:
        if set(self.effects) != set(self.texts):
            raise ValueError("planted playbook: every lesson code needs an effect and a text (keys differ: "
                             f"{sorted(set(self.effects) ^ set(self.texts))})")
        for code, text in self.texts.items():
            if CODE.findall(text) != [code]:
                raise ValueError(f"planted playbook: lesson {code}'s text must name its code once as '(tip {code})'")
        if self.interaction is not None and not {self.interaction[0], self.interaction[1]} <= set(self.effects):
            raise ValueError(f"planted playbook: interaction {self.interaction[:2]} names a code outside the bank")
        if not set(self.first) <= set(self.effects):
            raise ValueError(f"planted playbook: first {sorted(set(self.first) - set(self.effects))} not in the bank")
        if self.per_call < 1:
            raise ValueError(f"planted playbook: per_call {self.per_call} must be >= 1")
        if not 0.0 <= self.base <= 1.0:
            raise ValueError(f"planted playbook: base {self.base} must lie in [0, 1]")

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> "Plant":
        """From the config's ``params`` (``base``, ``lessons: {code: {effect, text}}``, ``interaction:
        [a, b, amount]`` or null, ``per_call``, ``first``)."""
        try:
            lessons = params["lessons"]
            inter = params["interaction"]
            return cls(float(params["base"]), {str(c): float(v["effect"]) for c, v in lessons.items()},
                       {str(c): str(v["text"]) for c, v in lessons.items()},
                       None if inter is None else (str(inter[0]), str(inter[1]), float(inter[2])),
                       int(params["per_call"]), tuple(str(c) for c in params["first"] or ()))
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"planted playbook params: {exc!r}; expected base, lessons: {{code: {{effect, text}}}}, "
                             "interaction: [a, b, amount] | null, per_call, first") from exc

    def chance(self, codes: Sequence[str] | set[str]) -> float:
        """p(S): the chance of the right action with the lessons ``codes`` served (unknown codes: no effect)."""
        held = set(codes)
        p = self.base + sum(self.effects.get(c, 0.0) for c in held)
        if self.interaction is not None and self.interaction[0] in held and self.interaction[1] in held:
            p += self.interaction[2]
        return min(1.0, max(0.0, p))

    def kind(self, code: str) -> str:
        e = self.effects[code]
        return "helpful" if e > 0 else "harmful" if e < 0 else "neutral"


def codes_in(text: str) -> list[str]:
    """The lesson codes a text shows, in order of first appearance."""
    return list(dict.fromkeys(CODE.findall(text)))


def _text(body: Mapping[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])


def _schema(body: Mapping[str, Any]) -> Mapping[str, Any]:
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") or {}


def role_of(body: Mapping[str, Any]) -> str:
    """``reflector``, ``curator`` or ``actor``: by the reply schema the request carries."""
    props = _schema(body).get("properties") or {}
    if "operations" in props:
        return "curator"
    if "tags" in props:
        return "reflector"
    return "actor"


def reflect(body: Mapping[str, Any]) -> str:
    """The planted Reflector: every shown lesson tagged ``neutral`` (tags carry no planted signal)."""
    ids = re.findall(r"^\[([^\]]+)\] ", _text(body).split("lessons shown during the attempt:", 1)[-1], flags=re.MULTILINE)
    allowed = ((_schema(body).get("properties") or {}).get("tags", {}).get("items", {}).get("properties", {})
               .get("id", {}).get("enum"))
    tags = [{"id": i, "tag": "neutral"} for i in dict.fromkeys(ids) if allowed is None or i in allowed]
    cap = (_schema(body).get("properties") or {}).get("tags", {}).get("maxItems")
    return json.dumps({"analysis": "planted review", "tags": tags[:cap] if cap is not None else tags})


def curate_reply(plant: Plant, body: Mapping[str, Any]) -> str:
    """The planted Curator: the next ``per_call`` bank lessons the playbook lacks, in an order drawn
    from the request (its reviewed attempts differ from run to run; module docstring)."""
    text = _text(body)
    playbook = text.split("Reviews of this batch", 1)[0]
    held = set(codes_in(playbook))
    missing = sorted((c for c in plant.texts if c not in held),
                     key=lambda c: (c not in plant.first, uniform(body, "curator", c), c))
    section = _section_slug(body)
    ops = [{"type": "ADD", "section": section, "content": plant.texts[c]} for c in missing[:plant.per_call]]
    return json.dumps({"reasoning": "planted curator", "operations": ops})


def _section_slug(body: Mapping[str, Any]) -> str:
    ops = (_schema(body).get("properties") or {}).get("operations", {})
    enum = ops.get("items", {}).get("properties", {}).get("section", {}).get("enum")
    return str(enum[0]) if enum else "others"


#: ``act(body, right) -> str``: the planted world's actor step (the right action if ``right``, else a
#: wrong one), from :mod:`memtrials.envs.planted`.
ActStep = Callable[[Mapping[str, Any], bool], str]


def actor_reply(plant: Plant, body: Mapping[str, Any], act: ActStep) -> str:
    """The planted actor: right with probability ``p(served lessons)``, one draw per episode
    (:func:`memtrials.envs.planted.agent.episode_uniform`)."""
    return act(body, episode_uniform(body, "playbook") < plant.chance(codes_in(_text(body).rsplit("Your task is to:", 1)[0])))


def make_policy(plant: Plant, act: ActStep) -> Callable[[Mapping[str, Any]], str]:
    """The planted endpoint's reply policy ``(body) -> str`` for every role of the study."""

    def reply(body: Mapping[str, Any]) -> str:
        role = role_of(body)
        if role == "curator":
            return curate_reply(plant, body)
        if role == "reflector":
            return reflect(body)
        return actor_reply(plant, body, act)

    return reply


def policy(**params: Any) -> Callable[[Mapping[str, Any]], str]:
    """The factory a planted registry entry names (``planted.policy:
    memtrials.studies.playbook.planted:policy``): ``params`` declare the bank (:meth:`Plant.of`)."""
    return make_policy(Plant.of(params), act)
