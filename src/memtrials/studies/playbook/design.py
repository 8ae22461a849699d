"""Design of the playbook study: settings, task lists per role, seeds, actors, memories.

*Reliable Memory from Unstable Growth*, Sections 2-3 and Appendix A.  A setting is a
system variant x model x benchmark (x growth recipe): ``ace-passfail`` (ACE; its
Reflector sees whether the task passed, on ALFWorld its success), ``ace-pertest`` (ACE on
AppWorld, the Reflector sees each unit test's result), ``ace-reward`` (ACE on WebShop, the
Reflector sees the purchase reward: "On WebShop it sees the reward", Appendix A) and
``dc`` (Dynamic Cheatsheet,
cumulative, which never sees the reward).  Growth recipes: ``std`` (at most
``max_passes`` passes, stop after a pass that grows the playbook by less than
``min_growth``) and ``long`` (``long_passes`` passes, no early stop).

Seeds (choices of ours, stated): every draw is a SHA-256 of the study seed and named
parts (:func:`memtrials.seeds.seed_of`), so a setting's task lists and seeds do not depend on which
other settings run.  An episode's ``sample`` index (part of the model-cache key, added
to the endpoint's seed) is its seed modulo 2^30: the estimate round, the candidates'
episodes and the evaluation episodes never share a model call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from memtrials.agent.actor import ActorSettings
from memtrials.envs.tasks import select_tasks
from memtrials.memory.ace import ACEPlaybook, piece_tokens
from memtrials.memory.cheatsheet import Cheatsheet
from memtrials.seeds import seed_of
from memtrials.studies.playbook.records import REWARD_SCORED

if TYPE_CHECKING:
    from memtrials.llm import Client

VARIANTS: dict[str, tuple[str, str | None]] = {  # variant -> (system, ACE feedback)
    "ace-passfail": ("ace", "pass_fail"),
    "ace-pertest": ("ace", "unit_tests"),
    "ace-reward": ("ace", "reward"),
    "dc": ("dc", None),
}
GROWTHS = ("std", "long")
ROLES = ("train", "practice", "eval")
TOKENIZERS: dict[str, Callable[[str], int]] = {"pieces": piece_tokens, "endpoint": piece_tokens}
"""Declared tokenizers for lesson token counts (the budget B is defined on them), each
with the word-level counter that ACE's Curator is shown its playbook's size in.
``pieces``: words and punctuation marks (``memtrials.memory.ace.piece_tokens``, the same
rule as the actor's approximate prompt tokens).  ``endpoint``: the setting's model's own
tokenizer (``POST /tokenize``: llama.cpp's server, vLLM; :mod:`memtrials.llm.token_count`,
cached), falling back to ``pieces`` where the endpoint exposes none (recorded)."""
ACTOR_KEYS = ("mode", "max_actions", "max_output_tokens", "max_listed_actions", "listing", "temperature")
SAMPLE_MOD = 2**30


def variants_for(env: str, systems: Sequence[str], appworld_feedback: Sequence[str]) -> list[str]:
    """The settings' variants on ``env``: ACE with pass/fail (and per-test on AppWorld; the
    reward on WebShop), DC."""
    out: list[str] = []
    if "ace" in systems:
        if env in REWARD_SCORED:
            out.append("ace-reward")
        elif env == "appworld":
            out += [{"pass_fail": "ace-passfail", "unit_tests": "ace-pertest"}[f] for f in appworld_feedback]
        else:
            out.append("ace-passfail")
    if "dc" in systems:
        out.append("dc")
    return out


def split_for(splits: Mapping[str, Any], env: str, source: str, role: str) -> str:
    """The task-table split that plays ``role`` (train / practice / eval) on ``env``'s ``source`` data."""
    return str(splits[env][source][role])


def role_tasks(tasks: pd.DataFrame, split: str, n: int | None, seed: int, source: str, key: str) -> list[str]:
    """``n`` tasks of ``split`` (``None``: all of them) by the one seeded stratified sampler;
    the error names ``key``."""
    return select_tasks(tasks, n, split, seed, source, fix=f"set {key} to at most the split's size, or use the "
                        "official data (envs.<env>.source: official) whose splits are larger")


def growth_parts(growth: str, env: str, run: int) -> tuple[Any, ...]:
    """The seed parts naming growth run ``run`` of recipe ``growth``: long growth's runs are three
    new runs (Appendix E), with their own orders and actor samples; ``std`` keeps the parts it
    always had (its seeds, and so its cached calls, are unchanged)."""
    return (env, run) if growth == "std" else (env, growth, run)


def growth_order(tasks: Sequence[str], seed: int, env: str, run: int, pass_: int, growth: str = "std") -> list[str]:
    """The training tasks in run ``run``'s order for pass ``pass_`` (a seeded permutation)."""
    rng = np.random.default_rng(seed_of(seed, "growth-order", *growth_parts(growth, env, run), pass_))
    return [tasks[i] for i in rng.permutation(len(tasks))]


def growth_seed(seed: int, env: str, run: int, pass_: int, task: str, growth: str = "std") -> int:
    """The actor seed (and sample index) of a growth episode: one per run, pass and task."""
    return seed_of(seed, "growth", *growth_parts(growth, env, run), pass_, task)


def actor_settings(model: str, actor: Mapping[str, Any], sample: int = 0) -> ActorSettings:
    """The actor of every episode of the study (raw history view, block format)."""
    unknown = sorted(set(actor) - set(ACTOR_KEYS))
    if unknown:
        raise ValueError(f"config key playbook.actor: unknown key(s) {unknown}; allowed: {', '.join(ACTOR_KEYS)}")
    return ActorSettings(model=model, view="raw", fmt="block", sample=int(sample) % SAMPLE_MOD, **dict(actor))


def tokenizer(name: str) -> Callable[[str], int]:
    if name not in TOKENIZERS:
        raise ValueError(f"config key playbook.tokenizer: {name!r} is not one of {', '.join(TOKENIZERS)}")
    return TOKENIZERS[name]


async def lesson_tokens(client: Client, name: str, model: str, texts: Sequence[str]) -> tuple[dict[str, int], str]:
    """Token counts of ``texts`` by the declared tokenizer ``name`` and which one counted
    (``endpoint:<model>``, or ``pieces`` with the reason when the endpoint has no tokenizer)."""
    count = tokenizer(name)
    texts = list(dict.fromkeys(str(t) for t in texts))
    if name == "endpoint":
        from memtrials.llm.token_count import count_tokens

        counts = await count_tokens(client, model, texts, purpose="lesson_tokens")
        if counts is not None:
            return dict(zip(texts, counts)), f"endpoint:{model}"
        return {t: count(t) for t in texts}, f"pieces (endpoint {model} exposes no /tokenize)"
    return {t: count(t) for t in texts}, name


def make_memory(variant: str, cell: Mapping[str, Any], prompts_dir: str) -> Any:
    """A fresh ACE playbook or Dynamic Cheatsheet for a growth run of ``variant``."""
    system, feedback = VARIANTS[variant]
    g, roles = cell["growth"], cell["roles"]
    if system == "ace":
        return ACEPlaybook(roles["reflector"], roles["curator"], roles["embedder"], prompts_dir,
                           token_budget=int(g["token_budget"]), feedback=str(feedback),
                           threshold=float(g["merge_threshold"]), grouped=bool(g["grouped"]),
                           reflector_max_tokens=g["reflector_max_tokens"], curator_max_tokens=g["curator_max_tokens"],
                           count_tokens=tokenizer(cell["tokenizer"]))
    return Cheatsheet(roles["curator"], prompts_dir, max_tokens=g["dc_max_tokens"])


def env_options(cell: Mapping[str, Any], env: str) -> dict[str, Any]:
    """``make_env`` options: the configured ones; on AppWorld the engine's step cap is the
    actor's budget, so that the last action is evaluated (the per-test feedback)."""
    opts = dict(cell["env_options"])
    if env == "appworld":
        opts.setdefault("max_steps", int(cell["actor"]["max_actions"]))
    return opts
