"""WebShop's task table: one row per synthetic goal, with its split, type and ``capped`` flag.

Splits, by goal index in upstream's goal order (the convention of WebShop's index ranges:
test 0-499, then 500-1499, then the rest):

* ``test`` -- goals 0-499 (500), the evaluation split of the 1,000-product setting.  These are
  *synthetic* goals (upstream's generator over this catalog); WebShop's 12,087 human-written
  instructions (and their test split) concern the full catalog and are not available offline;
  no split here stands for them;
* ``practice`` -- goals 500-1499 (999), the pool of practice / development tasks;
* ``train`` -- goals 1500-6909 (5,401), the pool of training tasks;
* ``duplicate`` -- 10 goals whose instruction text repeats that of a goal with a lower index
  (two products repeat an option value, two products share an instruction): left out of every
  pool, so that no instruction occurs in two splits (two of them repeat test instructions).

Sizes for the papers: anti-persistence draws 10 rounds x 50 training tasks from ``train`` and
100 held-out instructions from ``test``; playbook curation grows on ``train``, chooses on
``practice`` and scores the 500 ``test`` goals; the history study's 500 tasks per cell are the
``test`` split (the calibrator's sources come from ``train``).  The splits share products (a
product has ~17 goals, one per option combination; 146 of the 415 products with goals have one
in ``test``), as upstream's index splits do; ``detail.asin`` names the product.

``type`` is :data:`TASK_TYPE` for every goal (one kind of task: find and buy the described
product), so :func:`memtrials.envs.tasks.select_tasks` draws a seeded *uniform* sample of a split.
The catalog category is in ``detail.category``; as the stratum it would distort every draw (the
test split is 393 fashion, 57 garden, 23 beauty, 19 electronics and 8 grocery goals: a balanced
draw of 100 would take all 8 grocery goals and 25 fashion ones).  ``detail.capped``: upstream's option
matching scores even the exact purchase of this goal (target product, goal options) below 1.0
(458 of 6,910 goals; :mod:`.reward`), so success is out of reach there.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Collection

SPLITS: tuple[str, ...] = ("train", "practice", "test", "duplicate")
TEST_END = 500
PRACTICE_END = 1500
SOURCE = "generated"
TASK_TYPE = "purchase"


def split_of(index: int, seen_instruction: bool) -> str:
    """The split of goal ``index``; ``seen_instruction``: a lower index has the same instruction."""
    if index < TEST_END:
        return "test"
    if seen_instruction:
        return "duplicate"
    return "practice" if index < PRACTICE_END else "train"


@functools.lru_cache(maxsize=8)
def task_rows(root: str | Path | None = None, with_capped: bool = True) -> tuple[dict[str, Any], ...]:
    """The task table's rows of the shipped goals (data folder ``root``), computed once per
    process (callers must not modify them); ``with_capped=False`` leaves ``capped`` False, for
    counting splits and types before any job without loading the reward's spaCy pipeline."""
    from memtrials.envs.webshop.catalog import load_catalog

    catalog = load_catalog(root)
    capped: Collection[int] = ()
    if with_capped:
        from memtrials.envs.webshop.reward import capped_goals

        capped = frozenset(capped_goals(catalog))
    return tuple(rows_of(catalog.goals, capped))


def rows_of(goals: Any, capped: Collection[int]) -> list[dict[str, Any]]:
    """One task-table row per goal (``goals`` in upstream's order); ``capped``: the indices of
    the goals whose exact purchase scores below 1.0."""
    seen: set[str] = set()
    rows = []
    for goal in goals:
        split = split_of(goal.index, goal.instruction_text in seen)
        if split == "test" and goal.instruction_text in seen:
            raise ValueError(f"webshop: test goal {goal.index} repeats the instruction of a lower test goal")
        seen.add(goal.instruction_text)
        rows.append({"task_id": str(goal.index), "split": split, "type": TASK_TYPE, "source": SOURCE,
                     "category": goal.category, "asin": goal.asin, "query": goal.query,
                     "options": len(goal.goal_options),
                     "price_upper": goal.price_upper, "capped": goal.index in capped})
    return rows
