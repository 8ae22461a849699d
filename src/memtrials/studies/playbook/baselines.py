"""The baselines RBC is compared with: which lessons each one serves, at the same budget.

*Reliable Memory from Unstable Growth*, Section 5 and Appendix A.4 (Table 1, Tables 7-9,
11, 16).  Every budgeted baseline draws from one run's final playbook and keeps the served
lesson tokens within ``B`` of that playbook's (:func:`cap_of`; the same exact cap as
:func:`memtrials.curation.curate`), filling in its own rank order and skipping a lesson
that does not fit (:func:`fill`); the served lessons keep playbook order.

- Random (:func:`random_sets`): lessons in a seeded random order until B is full; two
  orders, the method's score is their mean.
- Own (:func:`own_rank`): ACE (Tags) by the share of helpful tags (helpful / all tags; a
  lesson never tagged has share 0), then helpful count; Dynamic Cheatsheet by usage count.
- Tags* (:data:`TAG_RULES`): eight tag rules of ours (the paper does not list its eight);
  the best on the evaluation tasks is reported, marked tuned on evaluation.
- Top-k and Top-k* (:class:`SimilarityView`): per task, the ``k`` lessons most similar to
  the task text by the embedder (ReasoningBank's retrieval), within B; Top-k* is the best
  of five ``k`` on the evaluation tasks.  Best-Full cut: the same view with no ``k`` over
  the playbook Best-Full chose, cut to 40 % of its tokens.
- DC_self / DC_outcome (:func:`dc_select`): Dynamic Cheatsheet's curator over the fixed
  lessons and the practice round's episodes, asked which lessons to keep within B; DC_self
  is never told an outcome, DC_outcome is told each one.  The prompts are ours
  (``config/prompts/playbook/``; SOURCES.md there).
- DG-Mem (:func:`dgmem_curated`): :func:`memtrials.stats.shapley.subset_shapley` on the
  practice round's episodes (inverse-probability weights from the round's design, exactly
  unbiased for the subset-Shapley value), served by RBC's rule (:func:`memtrials.curation.curate`).
- All-positive: every block with a positive ridge estimate, no cap (Table 16).
- Pooled (:func:`pooled_playbook`): the K runs' lessons pooled, near-duplicates merged.
- Judge (:func:`judge_labels`): the practice round re-scored by an LLM goal check (the
  setting's model, never told the outcome) instead of task success, then RBC's estimate and
  curation on those labels (Appendix E: task success cannot be replaced by a judge).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from memtrials.curation import curate, inclusion_matrix
from memtrials.curation.design import DESIGN_COLUMNS
from memtrials.memory.ace import cosines, greedy_groups
from memtrials.memory.base import Lesson, StaticEpisode, TaskContext
from memtrials.memory.lessons import trajectory_text
from memtrials.memory.retrieval import top_k
from memtrials.config.prompts import PromptFiles
from memtrials.stats.shapley import subset_shapley
from memtrials.studies.playbook.play import block_of
from memtrials.studies.playbook.records import REWARD_SCORED
from memtrials.studies.playbook.records import scores as play_scores
from memtrials.studies.playbook.methods import (  # noqa: F401  (re-exported)
    BASELINE_PROMPTS_KEY, DC_PROMPT_FILES, EVALUATION, JUDGE_PROMPT_FILES, METHODS, PRACTICE,
)

if TYPE_CHECKING:
    from memtrials.llm import Client

SELECT_SCHEMA = {"type": "object", "properties": {"keep": {"type": "array", "items": {"type": "string"}}},
                 "required": ["keep"], "additionalProperties": False}
TITLE = "Playbook"


def cap_of(lessons: pd.DataFrame, budget: float | None) -> Fraction | None:
    """``budget`` x the playbook's tokens, exact (None: no cap)."""
    if budget is None:
        return None
    if not 0 < float(budget) <= 1:
        raise ValueError(f"budget: a fraction of the playbook's tokens in (0, 1], got {budget}")
    return Fraction(repr(float(budget))) * int(lessons["tokens"].sum() if len(lessons) else 0)


def fill(ranked: Sequence[str], tokens: Mapping[str, int], cap: Fraction | float | None,
         k: int | None = None) -> list[str]:
    """Lessons taken in ``ranked`` order while the served tokens stay within ``cap`` (a lesson
    that does not fit is skipped), at most ``k`` of them; returned in rank order."""
    out: list[str] = []
    served = 0
    for lid in ranked:
        if k is not None and len(out) >= k:
            break
        t = int(tokens[lid])
        if cap is None or served + t <= cap:
            out.append(lid)
            served += t
    return out


def in_order(lessons: pd.DataFrame, ids: Sequence[str]) -> pd.DataFrame:
    """The rows of ``ids`` in playbook order."""
    keep = set(ids)
    return lessons[lessons["lesson_id"].isin(keep)] if len(lessons) else lessons


def _tokens(lessons: pd.DataFrame) -> dict[str, int]:
    return dict(zip(lessons["lesson_id"].astype(str), lessons["tokens"].astype(int)))


def random_sets(lessons: pd.DataFrame, budget: float, seed: int, orders: int = 2) -> list[list[str]]:
    """``orders`` random fills of the budget, each from its own seeded permutation."""
    ids = [str(x) for x in lessons["lesson_id"]]
    out = []
    for o in range(orders):
        perm = np.random.default_rng([int(seed), o]).permutation(len(ids))
        out.append(fill([ids[i] for i in perm], _tokens(lessons), cap_of(lessons, budget)))
    return out


def _tags(lessons: pd.DataFrame) -> pd.DataFrame:
    t = lessons[["lesson_id", "helpful", "harmful", "neutral"]].copy()
    for c in ("helpful", "harmful", "neutral"):
        t[c] = pd.to_numeric(t[c], errors="coerce").fillna(0).astype(int)
    t["total"] = t["helpful"] + t["harmful"] + t["neutral"]
    t["share"] = np.where(t["total"] > 0, t["helpful"] / t["total"].where(t["total"] > 0, 1), 0.0)
    t["pos"] = range(len(t))
    return t


#: Eight tag rules (ours): each a sort key over a lesson's tag counts, best first; ties by
#: playbook position.  ``share`` is helpful / all tags, ``net`` helpful - harmful.
TAG_RULES: dict[str, Callable[[pd.DataFrame], list[Any]]] = {
    "helpful_share": lambda t: [-t.share, -t.helpful],
    "helpful_count": lambda t: [-t.helpful],
    "net": lambda t: [-(t.helpful - t.harmful)],
    "fewest_harmful": lambda t: [t.harmful, -t.helpful],
    "helpful_vs_harmful": lambda t: [-(t.helpful / (t.helpful + t.harmful).where(t.helpful + t.harmful > 0, 1)),
                                     -t.helpful],
    "most_tagged": lambda t: [-t.total],
    "least_neutral": lambda t: [t.neutral / t.total.where(t.total > 0, 1), -t.helpful],
    "never_harmful": lambda t: [(t.harmful > 0).astype(int), -t.share, -t.helpful],
}


def tag_rank(lessons: pd.DataFrame, rule: str) -> list[str]:
    """Lesson ids ranked by tag rule ``rule`` (:data:`TAG_RULES`)."""
    if rule not in TAG_RULES:
        raise ValueError(f"tag rule {rule!r}: expected one of {', '.join(TAG_RULES)}")
    t = _tags(lessons)
    keys = [np.asarray(k, dtype=float) for k in TAG_RULES[rule](t)]
    order = np.lexsort([t["pos"].to_numpy(), *reversed(keys)])
    return [str(t["lesson_id"].iloc[i]) for i in order]


def own_rank(lessons: pd.DataFrame) -> list[str]:
    """The system's own judgement: ACE by helpful share, Dynamic Cheatsheet by usage count."""
    if lessons["helpful"].notna().any():
        return tag_rank(lessons, "helpful_share")
    uses = pd.to_numeric(lessons["uses"], errors="coerce").fillna(0).to_numpy()
    order = np.lexsort([np.arange(len(lessons)), -uses])
    return [str(lessons["lesson_id"].iloc[i]) for i in order]


def budget_set(lessons: pd.DataFrame, ranked: Sequence[str], budget: float | None) -> list[str]:
    return fill(ranked, _tokens(lessons), cap_of(lessons, budget))


@dataclass
class SimilarityView:
    """Per episode, the lessons most similar to the task text (cosine of the embedder's vectors),
    at most ``k`` (None: any number) and within ``cap`` tokens.  Keeps the served ids with
    their cosines per episode id in ``chosen`` (the job's record; the study's episode table
    declares no retrieval column)."""

    lessons: Sequence[Lesson]
    tokens: Mapping[str, int]
    embedder: str
    k: int | None = None
    cap: Fraction | float | None = None
    title: str = TITLE
    grouped: bool = False
    step_columns: Sequence[pa.Field] = ()
    episode_columns: Sequence[pa.Field] = ()
    chosen: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    async def for_episode(self, client: Client, task: TaskContext) -> StaticEpisode:
        if not self.lessons:
            self.chosen[task.episode_id] = []
            return StaticEpisode(None)
        keys = await client.embed(self.embedder, [x.text for x in self.lessons], purpose="baseline_similarity")
        query = await client.embed(self.embedder, [task.task], purpose="baseline_similarity")
        idx, sims = top_k(query.vectors[0], keys.vectors, len(self.lessons))
        sim = dict(zip((self.lessons[i].id for i in idx), sims))
        ids = fill([self.lessons[i].id for i in idx], self.tokens, self.cap, self.k)
        self.chosen[task.episode_id] = [{"id": i, "cosine": round(sim[i], 6)} for i in ids]
        keep = set(ids)
        served = tuple(x for x in self.lessons if x.id in keep)  # playbook order
        return StaticEpisode(block_of(served, self.grouped))  # the study's one rendering (play.block_of)


def dgmem_curated(design: pd.DataFrame, scores: pd.DataFrame, blocks: pd.DataFrame, lessons: pd.DataFrame,
                  budget: float, *, p: float, rule: str = "skip") -> tuple[list[str], pd.DataFrame]:
    """DG-Mem: subset-Shapley estimates from the practice round, curated by RBC's rule.

    ``design`` and ``blocks`` are the practice round's artifacts, ``scores`` its episodes'
    ``design_episode`` and what :func:`.records.scores` reads, ``p`` the round's inclusion probability (the estimator
    weighs episodes by the design's size probabilities).  Every block gets an estimate; the
    table also says which sizes of the other blocks the round left unobserved.
    """
    m = int(blocks["block"].max()) + 1 if len(blocks) else 0
    if m == 0:
        return [], pd.DataFrame()
    scored = pd.DataFrame({"episode": scores["design_episode"], "y": play_scores(scores)})
    joined = design.merge(scored, on="episode", how="inner", validate="one_to_one")
    if len(joined) != len(design):
        raise ValueError(f"DG-Mem: {len(design) - len(joined)} practice episodes of the design have no score; "
                         "rebuild the practice round")
    table = subset_shapley(joined[DESIGN_COLUMNS[1]].to_numpy(), inclusion_matrix(joined, m),
                           joined["y"].to_numpy(float), p=p)
    tok = _tokens(lessons)
    block_tok = blocks.groupby("block")["lesson_id"].apply(lambda s: sum(tok[str(x)] for x in s)).reindex(
        range(m), fill_value=0).to_numpy(dtype=np.int64)
    cur = curate(np.nan_to_num(table["estimate"].to_numpy(), nan=0.0), block_tok, budget=budget, rule=rule)
    chosen = set(cur.blocks)
    ids = [str(x) for x, b in zip(blocks["lesson_id"], blocks["block"]) if int(b) in chosen]
    return ids, table.assign(curated=[j in chosen for j in range(m)])


def positive_blocks(estimates: pd.DataFrame, blocks: pd.DataFrame) -> list[str]:
    """Every lesson of a block with a positive ridge estimate (the no-cap comparison, Table 16)."""
    pos = set(int(b) for b, e in zip(estimates["block"], estimates["estimate"]) if e > 0)
    return [str(x) for x, b in zip(blocks["lesson_id"], blocks["block"]) if int(b) in pos]


def pooled_playbook(playbooks: Sequence[pd.DataFrame], vectors: np.ndarray, threshold: float) -> pd.DataFrame:
    """The K runs' final playbooks pooled (run order, then playbook order), near-duplicates
    merged greedily by cosine >= ``threshold`` (the first lesson's text kept, tags and uses
    summed), ids prefixed by the run (``r1/<id>``); rows of the playbook schema."""
    rows = []
    for k, pb in enumerate(playbooks, 1):
        for r in pb.to_dict("records"):
            rows.append({**r, "lesson_id": f"r{k}/{r['lesson_id']}"})
    if not rows:
        return pd.DataFrame(columns=[*(playbooks[0].columns if playbooks else ["lesson_id", "text", "tokens"])])
    if len(vectors) != len(rows):
        raise ValueError(f"pooled_playbook: {len(vectors)} vectors for {len(rows)} pooled lessons")
    out = []
    for group in greedy_groups(cosines(vectors), threshold):
        head = dict(rows[group[0]])
        for c in ("helpful", "harmful", "neutral", "uses"):
            vals = [rows[i].get(c) for i in group]
            head[c] = None if all(v is None or pd.isna(v) for v in vals) else int(
                sum(0 if v is None or pd.isna(v) else int(v) for v in vals))
        head["merged"] = [rows[i]["lesson_id"] for i in group[1:]]
        out.append(head)
    df = pd.DataFrame(out)
    df["position"] = range(len(df))
    return df


def attempts_text(episodes: pd.DataFrame, steps: pd.DataFrame, with_outcome: bool, obs_chars: int = 300) -> str:
    """The practice episodes as the DC curator reads them; outcomes only when ``with_outcome``."""
    parts = []
    for k, ep in enumerate(episodes.itertuples(index=False), 1):
        st = steps[steps["episode_id"] == ep.episode_id].sort_values("step").to_dict("records")
        head = f"Attempt {k}. Task: {ep.task}"
        if with_outcome:
            head += f"\nOutcome: {'succeeded' if bool(ep.won) else 'failed'}"
            if str(getattr(ep, "env", "")) in REWARD_SCORED:  # WebShop: the purchase reward too
                head += f" (reward {float(ep.final_score):.2f})"
        parts.append(head + "\n" + trajectory_text(st, obs_chars))
    return "\n\n".join(parts)


async def dc_select(client: Client, curator: str, prompts_dir: str, lessons: pd.DataFrame, episodes: pd.DataFrame,
                    steps: pd.DataFrame, *, budget: float, with_outcome: bool, max_tokens: int | None = None,
                    ) -> dict[str, Any]:
    """One DC-curator call choosing which fixed lessons to keep within ``budget`` (DC_self when
    ``with_outcome`` is false: no outcome, no reward, no score is in the prompt).  The kept
    ids are taken in the order the curator lists them, unknown ids dropped, then cut to B."""
    prompts = PromptFiles.load(prompts_dir, DC_PROMPT_FILES, what="playbook", key=BASELINE_PROMPTS_KEY)
    tok = _tokens(lessons)
    cap = cap_of(lessons, budget)
    listing = "\n".join(f"[{r.lesson_id}] ({int(r.tokens)} tokens) {r.text}" for r in lessons.itertuples(index=False))
    outcome_rule = ("Each attempt says whether it succeeded." if with_outcome else
                    "You are not told how the attempts ended: judge for yourself from what the environment returned.")
    user = prompts.texts["dc_select_user.txt"].format(
        lessons=listing or "(none)", n_lessons=len(lessons), cap=int(cap) if cap is not None else 0,
        n_attempts=len(episodes), attempts=attempts_text(episodes, steps, with_outcome), outcome_rule=outcome_rule)
    messages = [{"role": "system", "content": prompts.texts["dc_select_system.txt"].strip()},
                {"role": "user", "content": user.rstrip("\n")}]
    r = await client.complete_json(curator, messages, SELECT_SCHEMA, schema_name="keep", max_tokens=max_tokens,
                                   purpose="dc_outcome_select" if with_outcome else "dc_self_select")
    listed = [str(x) for x in (r.value or {}).get("keep", [])] if r.valid else []
    known = [x for x in dict.fromkeys(listed) if x in tok]
    return {"keep": fill(known, tok, cap), "listed": listed, "valid": bool(r.valid), "error": r.error,
            "call_id": r.call_id, "with_outcome": with_outcome, "episodes": [str(x) for x in episodes["episode_id"]]}


async def judge_labels(client: Client, judge: str, prompts_dir: str, episodes: pd.DataFrame, steps: pd.DataFrame,
                       *, max_tokens: int | None = 4) -> pd.DataFrame:
    """One goal-check call per episode (task and transcript, no outcome): ``episode_id``,
    ``design_episode`` (if present), ``judged`` (1 for yes), ``reply``, ``call_id``."""
    prompts = PromptFiles.load(prompts_dir, JUDGE_PROMPT_FILES, what="playbook", key=BASELINE_PROMPTS_KEY)
    rows = []
    for ep in episodes.itertuples(index=False):
        st = steps[steps["episode_id"] == ep.episode_id].sort_values("step").to_dict("records")
        user = prompts.texts["judge_goal_user.txt"].format(task=ep.task, trajectory=trajectory_text(st, 300))
        messages = [{"role": "system", "content": prompts.texts["judge_goal_system.txt"].strip()},
                    {"role": "user", "content": user.rstrip("\n")}]
        sample = int(getattr(ep, "design_episode", 0) or 0)  # each episode's check is its own sample
        r = await client.complete(judge, messages, choices=["yes", "no"], max_tokens=max_tokens, sample=sample,
                                  purpose="judge_goal_check")
        reply = r.text.strip().lower()
        rows.append({"episode_id": ep.episode_id, "design_episode": getattr(ep, "design_episode", None),
                     "judged": 1.0 if reply.startswith("yes") else 0.0, "reply": r.text, "call_id": r.call_id})
    return pd.DataFrame(rows)


def candidate_name(method: str, variant: str, run: str) -> str:
    """The ``candidate`` of a baseline's evaluation episodes: ``method:variant:run``."""
    return f"{method}:{variant}:{run}"


def method_result(method: str, episodes: pd.DataFrame) -> dict[str, Any]:
    """A baseline's score from its evaluation episodes (0-100): each variant's score is the
    mean over runs of :func:`.analysis.method_score`; ``mean`` methods average the variants
    (Random: its two orders), ``best`` methods (Tags*, Top-k*) take the best variant, chosen
    on these very evaluation episodes (``tuned_on``)."""
    from memtrials.studies.playbook.analysis import method_score

    if method not in METHODS:
        raise ValueError(f"baseline {method!r}: expected one of {', '.join(METHODS)}")
    label, combine, sees = METHODS[method]
    parts = episodes["candidate"].astype(str).str.split(":", expand=True)
    if parts.shape[1] != 3 or (parts[0] != method).any():
        raise ValueError(f"{method}: candidates must read '{method}:<variant>:<run>'")
    per = {}
    for (variant, run), grp in episodes.groupby([parts[1], parts[2]]):
        per.setdefault(str(variant), []).append(method_score(grp))
    variants = {v: float(np.mean(s)) for v, s in per.items()}
    if not variants:
        return {"method": method, "label": label, "score": float("nan"), "chosen": None, "variants": {},
                "sees": sees, "tuned_on": None}
    if combine == "best":
        chosen = max(variants, key=lambda v: (variants[v], -sorted(variants).index(v)))
        score = variants[chosen]
    elif combine == "full":  # one variant per fraction of the round; the method's score is the whole round's
        chosen, score = None, variants.get("f100", float("nan"))
    else:
        chosen, score = None, float(np.mean(list(variants.values())))
    return {"method": method, "label": label, "score": score, "chosen": chosen, "variants": variants,
            "sees": sees, "tuned_on": "evaluation tasks" if combine == "best" else None,
            "runs": sorted(set(parts[2].astype(str)))}
