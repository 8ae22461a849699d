"""WebShop's text environment as a state machine: sessions, actions, transitions, rewards.

:class:`WebShopEngine` answers what upstream's ``WebAgentTextEnv(observation_mode='text',
num_products=1000)`` answers (princeton-nlp/WebShop at 64fa2a5, as AgentGym runs it), action for
action: the same observation strings (:mod:`.pages`), available actions, rewards and done flags,
and the same simulated URL, which upstream's routing reads.  The recorded transcripts of the
upstream environment replay through it exactly (``tests/envs/webshop/test_engine_transcripts.py``).

Actions (upstream's parsing, quirks kept):

* ``name[arg]`` is matched greedily from the start of the string (``(.+)\\[(.+)\\]``, no
  anchor at the end, ``.`` not crossing a newline); ``arg`` is lowercased.  ``search[arg]``
  with a non-empty ``arg`` searches from *any* page (upstream does not check the search bar);
  ``click[arg]`` is accepted if ``arg`` is a clickable of the current page other than
  ``search``.  Anything else -- ``Search[x]``, ``search [x]``, ``search[]``, ``click[]``, an
  unknown button, ``click[search]`` -- changes nothing and is answered with the unchanged page,
  reward ``0`` (an ``int``), not done; an accepted action is answered with reward ``0.0`` (a
  ``float``) until Buy Now.  ``search[pillow]]`` searches for ``pillow]``.
* A search goes to page 1 of its results and clears the selected product and options;
  ``Next >`` / ``< Prev`` page through the results (50 hits at most, 10 a page; ``Next >`` is
  on every results page, past the last one too); a product link opens its item page; an option
  value sets ``options[group] = value`` (the last click in a group wins); ``< Prev`` on an item
  page goes back to the results page (options cleared), on a sub-page back to the item page
  (options kept); ``Back to Search`` goes to the start page from every page but the done page;
  ``Buy Now`` scores the purchase (:mod:`.reward`) and shows the done page, which has no
  clickables.  After Buy Now upstream still accepts searches, and a second Buy Now scores
  again; the engine does too (the :class:`~memtrials.envs.webshop.env.WebShopEnv` episode ends
  at the first).
* Upstream decides where ``< Prev`` and ``Next >`` lead from the page's URL, by the first of
  ``search_results``, ``item_page``, ``item_sub_page``, ``done`` it contains -- search words
  are part of that URL, so ``search[search_results]`` then a product then ``< Prev`` goes to
  results page 0 (empty).  The engine keeps the URL and routes the same way.
* Keyword prefixes upstream's search understands: ``<q> text`` lists the products whose
  ``query`` field is ``text``, ``<c> category`` those of a category (catalog order, not cut at
  50), ``<r>`` 50 random products (upstream's global ``random``; here a generator seeded by the
  session and the number of such draws, so that a replay repeats it).  ``<a> ...`` and a bare
  ``<c>`` raise inside upstream's server (an attribute map it never passes, an index error); here
  they are answered as invalid actions.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, Callable, Mapping, Sequence

from memtrials.envs.webshop import pages
from memtrials.envs.webshop.pages import Page

BASE_URL = "http://127.0.0.1:3000"
SEARCH_RETURN_N = 50
_ACTION = re.compile(r"(.+)\[(.+)\]")
_PAGE_NAMES = ("search_results", "item_page", "item_sub_page", "done")
_SUB_KEYS = {name.lower(): name for name in pages.SUB_PAGES}

#: ``search(query) -> ranked ASINs`` (top 50) and ``reward(product, goal, price, options) -> (reward, info)``.
SearchFn = Callable[[str], Sequence[str]]
RewardFn = Callable[[Any, Any, float, Mapping[str, str]], "tuple[float, dict]"]


class InvalidAction(Exception):
    """An action upstream's server would not answer (it raises); the engine treats it as a no-op."""


def parse_action(action: str) -> tuple[str, str | None]:
    """``(name, arg)`` as upstream parses an action string (``arg`` not yet lowercased)."""
    m = _ACTION.match(action)
    return (action, None) if m is None else (m.group(1), m.group(2))


def page_name(url: str | None) -> str | None:
    """Upstream's ``get_page_name``: the first page name the URL contains ('' for the start page)."""
    if url is None:
        return None
    return next((name for name in _PAGE_NAMES if name in url), "")


class WebShopEngine:
    """One browser session over a shared catalog.  ``search`` and ``reward`` are the
    catalog's search engine and purchase reward; ``products`` and ``prices`` come from the
    catalog (``{asin: Product}`` in catalog order, ``{asin: env price}``)."""

    def __init__(self, products: Mapping[str, Any], prices: Mapping[str, float], search: SearchFn,
                 reward: RewardFn) -> None:
        self.products, self.prices = products, prices
        self._search, self._reward = search, reward
        self.session_id = ""
        self.goal: Any = None
        self.page: Page | None = None
        self.url: str | None = None
        self.keywords: list[str] | None = None
        self.page_no: int | None = None
        self.asin: str | None = None
        self.options: dict[str, str] = {}
        self.purchase: dict[str, Any] | None = None
        self._random_draws = 0

    # -- the browser's three calls ---------------------------------------------------------
    def reset(self, goal: Any, session_id: str) -> str:
        """Start the session of ``goal`` (``session_id``: upstream's session string, the goal
        index) on the start page; return its observation."""
        self.session_id, self.goal, self.url = str(session_id), goal, None
        self.purchase, self._random_draws = None, 0
        self._start()
        return self.observation

    def step(self, action: str) -> tuple[str, float | int, bool]:
        """``(observation, reward, done)`` after ``action``; see the module docstring."""
        if self.page is None:
            raise RuntimeError("webshop: step() before reset()")
        name, arg = parse_action(action)
        if arg is not None:
            arg = arg.lower()
        try:
            if name == "search" and arg:
                reward, done = self._search_page(arg.split(" "), 1), False
            elif name == "click" and arg is not None and arg in self.page.clickables and arg != "search":
                reward, done = self._click(arg)
            else:
                raise InvalidAction(action)
        except InvalidAction:
            return self.observation, 0, False
        return self.observation, reward, done

    def available_actions(self) -> dict[str, Any]:
        """``{'has_search_bar': bool, 'clickables': [...]}`` of the current page."""
        if self.page is None:
            raise RuntimeError("webshop: available_actions() before reset()")
        return self.page.available()

    @property
    def observation(self) -> str:
        return self.page.text if self.page is not None else ""

    # -- pages -----------------------------------------------------------------------------
    def _start(self) -> float:
        self.keywords, self.page_no, self.asin, self.options = None, None, None, {}
        self.page = pages.start_page(self.goal.instruction_text)
        self.url = f"{BASE_URL}/{self.session_id}"
        return 0.0

    def _hits(self, keywords: list[str]) -> list[str]:
        head = keywords[0]
        if head == "<r>":
            rng = random.Random(f"webshop-r:{self.session_id}:{self._random_draws}")
            self._random_draws += 1
            return rng.sample(list(self.products), k=SEARCH_RETURN_N)
        if head == "<c>":
            if len(keywords) < 2:
                raise InvalidAction("<c> without a category")
            category = keywords[1].strip()
            return [a for a, p in self.products.items() if p.category == category]
        if head == "<q>":
            query = " ".join(keywords[1:]).strip()
            return [a for a, p in self.products.items() if p.query == query]
        if head == "<a>":
            raise InvalidAction("<a> attribute search")
        return [a for a in self._search(" ".join(keywords)) if a in self.products]

    def _search_page(self, keywords: list[str] | None, page_no: int) -> float:
        if not keywords:
            raise InvalidAction("no search to page through")
        hits = self._hits(keywords)
        self.keywords, self.page_no, self.asin, self.options = keywords, page_no, None, {}
        start = (page_no - 1) * pages.PRODUCTS_PER_PAGE  # Python slicing, as upstream (page 0 is empty)
        rows = [self.products[a] for a in hits[start:page_no * pages.PRODUCTS_PER_PAGE]]
        self.page = pages.results_page(self.goal.instruction_text, page_no, len(hits), rows)
        self.url = f"{BASE_URL}/search_results/{self.session_id}/{self._kw()}/{page_no}"
        return 0.0

    def _kw(self) -> str:
        return "+".join(self.keywords or [])

    def _item_page(self) -> float:
        if self.asin is None:
            raise InvalidAction("no product selected")
        self.page = pages.item_page(self.goal.instruction_text, self.products[self.asin])
        self.url = (f"{BASE_URL}/item_page/{self.session_id}/{self.asin}/{self._kw()}/{self.page_no}/"
                    f"{json.dumps(self.options)}")
        return 0.0

    def _sub_page(self, key: str) -> float:
        which = _SUB_KEYS[key]
        self.page = pages.sub_page(self.goal.instruction_text, self.products[self.asin], which)
        self.url = (f"{BASE_URL}/item_sub_page/{self.session_id}/{self.asin}/{self._kw()}/{self.page_no}/"
                    f"{which}/{self.options}")
        return 0.0

    def _buy(self) -> float:
        product = self.products[self.asin]
        reward, info = self._reward(product, self.goal, self.prices[self.asin], dict(self.options))
        self.purchase = {"asin": self.asin, "options": dict(self.options), "reward": reward, "info": info}
        self.page = pages.done_page(self.asin, self.options, reward)
        self.url = f"{BASE_URL}/done/{self.session_id}/{self.asin}/{self.options}"
        return reward

    def _click(self, key: str) -> tuple[float, bool]:
        """Upstream's routing of a click, in its order (the button's text first, then the URL's page)."""
        where = page_name(self.url)
        if key == pages.BUY_NOW.lower():
            return self._buy(), True
        if key == pages.BACK_TO_SEARCH.lower():
            return self._start(), False
        if key == pages.NEXT_PAGE.lower() and where == "search_results":
            return self._search_page(self.keywords, (self.page_no or 0) + 1), False
        if key == pages.PREV_PAGE.lower() and where == "search_results":
            return self._search_page(self.keywords, (self.page_no or 0) - 1), False
        if key == pages.PREV_PAGE.lower() and where == "item_sub_page":
            return self._item_page(), False
        if key == pages.PREV_PAGE.lower() and where == "item_page":
            return self._search_page(self.keywords, self.page_no or 0), False
        if key in _SUB_KEYS:
            return self._sub_page(key), False
        target = self.page.clickables[key] if self.page is not None else None
        if target is not None and target.kind == "product":
            self.asin = key.upper()
        elif target is not None and target.kind == "option":
            self.options[str(target.group).lower()] = key
        return self._item_page(), False
