"""WebShop's pages in text mode: what each page shows and what it lets the agent click.

Upstream (princeton-nlp/WebShop, ``web_agent_text_env.py``) renders every page as HTML from its
Flask templates, parses it with BeautifulSoup (``html.parser``) and, in ``text`` mode, joins
the visible strings with ``" [SEP] "`` (AgentGym's observation).  This module builds the same
strings directly from the page's content, without HTML:

* every value a template prints (instruction, title, price tag, option value, ...) is one
  visible string, stripped; an empty value prints nothing; a value of ASCII whitespace
  only prints nothing if it holds a newline and an empty segment otherwise (BeautifulSoup
  collapses such a string to ``"\\n"``, which the text mode drops, or to ``" "``, which it
  keeps, stripped to ``""``);
* clickables, in upstream's order: the lowercased text of the page's buttons, then its
  product links (ASINs, lowercased), then its option values (already lowercase in the
  catalog); a key seen twice keeps its first position and its last target, as a Python
  dict does (an option value equal to a button's text, one value in two option groups).

Pages: the start page (instruction, search bar), a results page (Back to Search, the page
number and total, ``< Prev`` from page 2 on, ``Next >`` on *every* results page, also past the
last one -- upstream's template shows it unconditionally, so page 6 of 50 results exists and
is empty -- then ten rows of ASIN, title and price tag), an item page (option groups, title,
``Price:``, ``Rating:``, Description / Features / Reviews / Buy Now), its sub-pages
(description text, one string per bullet point, reviews; the Attributes page is never
linked: upstream runs with ``show_attrs=False``) and the done page (the purchase as upstream's
template prints it with most fields empty, the options as sorted, HTML-safe JSON, the reward).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

SEP = " [SEP] "
BACK_TO_SEARCH, PREV_PAGE, NEXT_PAGE, BUY_NOW = "Back to Search", "< Prev", "Next >", "Buy Now"
SEARCH_BUTTON = "Search"
#: Sub-page buttons as upstream names them (its ``ACTION_TO_TEMPLATE`` keys), in template order.
SUB_PAGES: tuple[str, ...] = ("Description", "Features", "Reviews", "Attributes")
PRODUCTS_PER_PAGE = 10
_ASCII_SPACES = " \n\t\x0c\r"


@dataclass(frozen=True)
class Clickable:
    """What a clickable key points at: a ``button``, a ``product`` link, or an ``option``
    value (radio input) of option group ``group``."""

    kind: str
    group: str | None = None


@dataclass(frozen=True)
class Page:
    """One rendered page: its ``kind`` (start, results, item, sub, done), its text-mode
    observation, its clickables (ordered) and whether it shows the search bar."""

    kind: str
    text: str
    clickables: Mapping[str, Clickable]
    has_search_bar: bool = False

    def available(self) -> dict[str, Any]:
        """Upstream's ``get_available_actions()``: ``has_search_bar`` and the clickable keys."""
        return {"has_search_bar": self.has_search_bar, "clickables": list(self.clickables)}


def shown(value: Any) -> list[str]:
    """The visible strings a printed template value contributes (see the module docstring)."""
    text = str(value)
    if not text:
        return []
    if not text.strip(_ASCII_SPACES):
        return [] if "\n" in text else [""]
    return [text.strip()]


def join(parts: Iterable[Any]) -> str:
    """The text-mode observation of a page's visible strings."""
    out: list[str] = []
    for part in parts:
        out.extend(shown(part))
    return SEP.join(out)


def _buttons(*labels: str) -> dict[str, Clickable]:
    return {label.lower(): Clickable("button") for label in labels}


def start_page(instruction: str) -> Page:
    """The search page a session starts on (the only page with the search bar)."""
    return Page("start", join(["WebShop", "Instruction:", instruction, SEARCH_BUTTON]),
                _buttons(SEARCH_BUTTON), has_search_bar=True)


def results_page(instruction: str, page: int, total: int, rows: Sequence[Any]) -> Page:
    """A results page: ``rows`` are the products of this page (objects with ``asin``,
    ``title``, ``price_tag``); ``total`` the number of hits of the whole search."""
    nav = [PREV_PAGE, NEXT_PAGE] if page > 1 else [NEXT_PAGE]
    parts: list[Any] = ["Instruction:", instruction, BACK_TO_SEARCH, f"Page {page} (Total results: {total})", *nav]
    clickables = _buttons(BACK_TO_SEARCH, *nav)
    for product in rows:
        parts += [product.asin, product.title, product.price_tag]
        clickables[str(product.asin).lower()] = Clickable("product")
    return Page("results", join(parts), clickables)


def _with_options(clickables: dict[str, Clickable], options: Mapping[str, Sequence[str]]) -> dict[str, Clickable]:
    for group, values in options.items():
        for value in values:
            clickables[str(value)] = Clickable("option", group)
    return clickables


def item_page(instruction: str, product: Any) -> Page:
    """A product's page: option groups and values, title, price tag, rating, the sub-page
    buttons and Buy Now (upstream's ``show_attrs=False``: no Attributes button)."""
    parts: list[Any] = ["Instruction:", instruction, BACK_TO_SEARCH, PREV_PAGE]
    for group, values in product.options.items():
        parts += [group, *values]
    parts += [product.title, f"Price: {product.price_tag}", f"Rating: {product.rating}", *SUB_PAGES[:3], BUY_NOW]
    clickables = _buttons(BACK_TO_SEARCH, PREV_PAGE, *SUB_PAGES[:3], BUY_NOW)
    return Page("item", join(parts), _with_options(clickables, product.options))


def sub_page(instruction: str, product: Any, which: str) -> Page:
    """The ``which`` sub-page (one of :data:`SUB_PAGES`) of ``product``."""
    parts: list[Any] = ["Instruction:", instruction, BACK_TO_SEARCH, PREV_PAGE]
    if which == "Description":
        parts.append(product.description)
    elif which == "Features":
        parts += [f" {bullet}" for bullet in product.bullet_points]
    elif which == "Reviews":
        for review in product.reviews:  # empty in this catalog (upstream's review file is not loaded)
            parts += [f'"{review["title"]}"', review["score"], review["body"]]
    elif which == "Attributes":
        parts += [f" {attribute}" for attribute in product.attributes]
        parts += [product.category, product.query, product.product_category]
    else:
        raise ValueError(f"webshop: unknown sub-page {which!r}; expected one of {SUB_PAGES}")
    return Page("sub", join(parts), _buttons(BACK_TO_SEARCH, PREV_PAGE))


def options_json(options: Mapping[str, str]) -> str:
    """The bought options as the done page prints them: Flask's ``tojson`` (sorted keys,
    ASCII, then ``< > & '`` as ``\\u`` escapes)."""
    text = json.dumps(dict(options), sort_keys=True, ensure_ascii=True)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        text = text.replace(char, escape)
    return text


def done_page(asin: str, options: Mapping[str, str], reward: Any) -> Page:
    """The page after Buy Now: no clickables; the fields upstream's env leaves unset print
    ``None`` (or nothing where the template reads an attribute of the unset goal)."""
    parts = ["Thank you for shopping with us!", "Your code:", None, "(Paste it in your MTurk interface.)",
             "Purchased", "asin", asin, "options", options_json(options), "attrs", None, "category", None,
             "query", None, "product category", None, "Target", "asin", "options", "attrs", "price upper",
             "instuction text", "category", "product category", "query", "Goal", None, "Reward",
             "Your score (min 0.0, max 1.0)", reward, "Reward Details", None]
    return Page("done", join(parts), {})
