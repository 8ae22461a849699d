"""WebShop (1,000 products, synthetic goals) behind the :class:`~memtrials.envs.base.Env` interface.

A task id is a goal's index in upstream's goal order (``"0"`` ... ``"6909"``, what
``env.reset(session=index)`` picks upstream and in AgentGym).  The engine is this project's
re-implementation of upstream's text environment (:mod:`.engine`, :mod:`.pages`) over the shipped
catalog (:mod:`.catalog`), its BM25 search (:mod:`.search`) and upstream's purchase reward
(:mod:`.reward`); it is pure Python, so it runs in the caller's process, and one catalog and
search index are shared read-only by every object of a process (``thread_safe``: objects hold
their own session; the reward's spaCy calls are serialized under one lock).

Actions an agent sends: ``search[<keywords>]`` (any words; upstream lowercases them) and
``click[<clickable>]`` with a clickable of the current page, lowercased as upstream lists them
(``click[back to search]``, ``click[next >]``, ``click[< prev]``, ``click[b09qcp4579]``,
``click[3x-large]``, ``click[description]``, ``click[buy now]``).  :meth:`WebShopEnv.admissible_actions`
lists ``click[...]`` for every clickable upstream accepts (its ``search`` button is refused) and,
on the page with the search bar (the start page, the only one where upstream shows it), the
template :data:`SEARCH_ACTION`, whose ``<keywords>`` the agent fills in.  Upstream accepts a
search on every page; only the start page lists it, as upstream's available actions do.

Scores: ``score`` is the purchase reward in [0, 1] (0 before Buy Now), ``won`` is reward 1.0
(the success flag of the papers), ``done`` comes with the first Buy Now or after ``max_steps``
steps.  Upstream keeps answering after Buy Now (searches work, a second Buy Now scores again);
here later steps are still answered by the engine, but ``done``, ``score`` and ``won`` stay those
of the first purchase.  ``obs.info`` carries the page's URL, ``has_search_bar``, its clickables,
``valid`` (upstream answered the action: reward ``0.0``, not the ``0`` of an invalid action) and,
after Buy Now, ``purchase`` (ASIN, options, reward and its components).
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

from memtrials.envs.base import Env, Observation
from memtrials.envs.webshop.engine import WebShopEngine

#: The admissible entry of the search bar: ``<keywords>`` is the agent's to write.
SEARCH_ACTION = "search[<keywords>]"
EXPERT_MAX_PAGES = 5
_reward_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def shop(root: str | None = None) -> tuple[Any, Any]:
    """``(catalog, search engine)`` of the data folder ``root`` (default ``data/webshop/``), built
    once per process and shared by every environment object."""
    from memtrials.envs.webshop.catalog import load_catalog
    from memtrials.envs.webshop.search import load_search_engine

    return load_catalog(root), load_search_engine(root)


@functools.lru_cache(maxsize=4)
def ranked(root: str | None = None) -> Callable[[str], tuple[str, ...]]:
    """The shared search of ``root``'s catalog, memoized per query (a results page re-runs its
    search on every ``Next >`` / ``< Prev``, as upstream does; the ranking is a pure function
    of the query)."""
    engine = shop(root)[1]

    @functools.lru_cache(maxsize=4096)
    def search(query: str) -> tuple[str, ...]:
        return tuple(engine.search(query))

    return search


def _reward(product: Any, goal: Any, price: float, options: Mapping[str, str]) -> tuple[float, dict]:
    from memtrials.envs.webshop.reward import purchase_reward

    with _reward_lock:
        return purchase_reward(product, goal, price, options)



NAVIGATION = ("description", "features", "reviews", "< prev", "next >", "back to search")
"""The buttons that lead away from a page's content, listed last by :func:`listing_order`."""


def listing_order(page: Any) -> list[str]:
    """The order in which the admissible actions list a page's clickables: the page's content
    first (a results page's products; an item page's option values, then Buy Now), then the
    buttons that lead away from it (:data:`NAVIGATION`), each group in upstream's order.  The
    project's choice (upstream's text env lists Back to Search first): a model that tends to pick
    the first listed action is not steered away from the shop's content by the page's
    navigation.  The clickables themselves (what upstream accepts, in its order) are unchanged."""
    names = list(page.clickables)
    return [c for c in names if c not in NAVIGATION] + [c for c in names if c in NAVIGATION]

class WebShopEnv(Env):
    """One browser session at a time over the process's shared catalog and search index.

    Options: ``root`` (the data folder; default the shipped ``data/webshop/``), ``max_steps``
    (``done`` after that many steps; the studies set 30 or 50)."""

    name = "webshop"
    thread_safe = True

    def __init__(self, root: str | Path | None = None, max_steps: int | None = None) -> None:
        self.root = None if root is None else str(root)
        self.catalog = shop(self.root)[0]
        self.max_steps = max_steps
        self.engine = self._engine()
        self._task_id: str | None = None
        self._step = 0
        self._final: Observation | None = None
        self._listed: tuple[Any, tuple[str, ...], tuple[str, ...]] | None = None

    def _engine(self) -> WebShopEngine:
        return WebShopEngine(self.catalog.products, self.catalog.prices, ranked(self.root), _reward)

    def goal(self, task_id: str) -> Any:
        """The goal of ``task_id`` (its index in upstream's goal order); a precise error otherwise."""
        goals = self.catalog.goals
        try:
            index = int(str(task_id))
        except ValueError:
            index = -1
        if not 0 <= index < len(goals) or str(index) != str(task_id):
            raise KeyError(f"webshop: no goal {task_id!r}; task ids are goal indices '0' ... '{len(goals) - 1}' "
                           "(results/tasks/webshop.parquet)")
        return goals[index]

    # -- Env -------------------------------------------------------------------------------
    def reset(self, task_id: str) -> Observation:
        goal = self.goal(task_id)
        text = self.engine.reset(goal, str(goal.index))
        self._task_id, self._step, self._final = str(task_id), 0, None
        return Observation(text=text, step=0, admissible=self.admissible_actions(),
                           info={"task_id": self._task_id, **self._page_info()})

    def step(self, action: str) -> Observation:
        if self._task_id is None:
            raise RuntimeError("webshop: step() before reset(task_id)")
        text, reward, done = self.engine.step(action)
        self._step += 1
        info = {"valid": isinstance(reward, float), **self._page_info()}
        if self._final is not None:  # the episode ended at the first purchase
            f = self._final
            return Observation(text=text, step=self._step, reward=0.0, score=f.score, done=True, won=f.won,
                               admissible=self.admissible_actions(), info=info)
        score = float(reward) if done else 0.0
        if done:
            p = self.engine.purchase or {}
            info["purchase"] = {"asin": p.get("asin"), "options": p.get("options"), "reward": score,
                                "info": p.get("info")}
        capped = self.max_steps is not None and self._step >= self.max_steps
        obs = Observation(text=text, step=self._step, reward=float(reward), score=score, done=done or capped,
                          won=done and score == 1.0, admissible=self.admissible_actions(), info=info)
        if obs.done:
            self._final = obs
        return obs

    def _page_info(self) -> dict[str, Any]:
        page = self._listing()[0]
        return {"url": self.engine.url, "has_search_bar": page.has_search_bar, "clickables": self._listed[1]}

    def _listing(self) -> tuple[Any, tuple[str, ...], tuple[str, ...]]:
        """``(page, its clickables, its admissible actions)``, computed once per page (pages are immutable)."""
        page = self.engine.page
        if self._listed is None or self._listed[0] is not page:
            clickables = tuple(page.clickables)
            clicks = tuple(f"click[{c}]" for c in listing_order(page) if c != "search")
            self._listed = (page, clickables, ((SEARCH_ACTION,) if page.has_search_bar else ()) + clicks)
        return self._listed

    def task_description(self) -> str:
        return self.engine.goal.instruction_text if self.engine.goal is not None else ""

    def admissible_actions(self) -> tuple[str, ...] | None:
        return None if self.engine.page is None else self._listing()[2]

    def random_action(self, rng: Any) -> str:
        """One uniform choice among ``search[<goal query>]`` and ``search[<instruction>]`` (where
        the search bar is shown) and ``click[c]`` for every clickable, the no-op
        ``click[search]`` included: the random policy of the golden transcripts, which
        ``random.Random(goal index)`` reproduces action for action (it stopped at done; on the
        done page, which lists nothing, one of the two searches)."""
        goal = self.engine.goal
        page, clickables, _ = self._listing()
        searches = [f"search[{goal.query}]", f"search[{goal.instruction_text}]"]
        actions = (searches if page.has_search_bar else []) + [f"click[{c}]" for c in clickables]
        return str(rng.choice(actions or searches))  # the done page lists nothing: upstream still searches

    def gold_actions(self, task_id: str) -> list[str]:
        """Upstream's expert, as the golden transcripts recorded it: ``search[<goal query>]``, then
        ``Next >`` until the target is on the page, a page is empty, or page 5 was seen; if not
        found, ``Back to Search`` and the same with the instruction text; then the target, each
        goal option value its page shows (goal order), Buy Now.  Where neither search lists the
        target in its 50 hits (19 of the 6,910 goals, goal 444 of the test split; never on goals
        0-199), a third search for the target's title finds it on page 1 (all 19), where the
        recording's expert would have bought the first result instead: the gold agent buys the
        target on every goal.  Planned on a private engine, so the current episode is untouched."""
        return expert_actions(self._engine(), self.goal(task_id))


def expert_actions(engine: WebShopEngine, goal: Any) -> list[str]:
    """The expert's actions for ``goal``, played on ``engine`` (which it resets) up to Buy Now."""
    target = str(goal.asin).lower()
    actions: list[str] = []

    def act(action: str) -> dict[str, Any]:
        actions.append(action)
        engine.step(action)
        return engine.available_actions()

    engine.reset(goal, str(goal.index))
    found = False
    title = engine.products[goal.asin].title
    for i, query in enumerate((goal.query, goal.instruction_text, title)):
        if i:
            act("click[back to search]")
        available = act(f"search[{query}]")
        for page in range(1, EXPERT_MAX_PAGES + 1):
            if target in available["clickables"]:
                found = True
                break
            shows_products = any(t.kind == "product" for t in engine.page.clickables.values())
            if not shows_products or page == EXPERT_MAX_PAGES:
                break
            available = act("click[next >]")
        if found:
            break
    if not found:  # give up: the first result of the last search
        act("click[back to search]")
        act(f"search[{title}]")
        links = [k for k, t in engine.page.clickables.items() if t.kind == "product"]
        if not links:
            return actions
        target = links[0]
    available = act(f"click[{target}]")
    for value in goal.goal_options.values():
        if value in available["clickables"]:
            available = act(f"click[{value}]")
    actions.append("click[buy now]")  # not played: planning needs no reward
    return actions
