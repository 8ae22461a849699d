"""The WebShop catalog, its environment prices and its synthetic goals, as upstream builds them.

:func:`load_catalog` returns a frozen :class:`Catalog` (cached per process and data folder):

* ``products`` -- ``{asin: Product}`` in catalog order, each with what upstream's
  ``load_products`` gives the environment (field names in snake case, mapping below);
* ``prices`` -- ``{asin: float}``, the price the reward compares with a goal's cap: the single
  price, 100.0 when none is listed, or for the 93 products with a range a uniform draw between
  its first two prices;
* ``goals`` -- the 6,910 synthetic goals in environment order (:class:`Goal`, ``index`` = the
  position ``reset(session=index)`` picks).

Upstream draws the range prices and each product's goal price cap from Python's global
``random`` without seeding it, and seeds only the goal shuffle (233).  We pin the draws as the
reference recording did (``random.seed(0)`` before the env is built): the range prices in catalog
order, then one 2-sample per product with an instruction in catalog order, then the shuffle with
seed 233 of the goals in generation order (catalog order; option names sorted; value combinations
in the item page's value order).  Tests check prices and goals against the recorded ones.

Upstream key -> :class:`Product` field: ``asin`` asin, ``name`` name, ``Title`` title,
``Description`` description, ``BulletPoints`` bullet_points, ``Price`` price_tag, ``pricing``
pricing, ``options`` options, ``Attributes`` attributes, ``category``, ``query`` (lowercased,
stripped), ``product_category``, ``instruction_text``, ``instruction_attributes``, ``MainImage``
main_image, ``Rating`` rating (always ``N.A.``: the reviews file is not part of the 1k data),
``Reviews`` reviews (always empty, as upstream's recording shows).
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Mapping

from memtrials.envs.webshop import data

#: Candidate price caps (upstream's PRICE_RANGE): 10, 20, ..., 990.
PRICE_CAPS = tuple(10.0 * i for i in range(1, 100))
#: Cap of a goal whose product has fewer than two candidate caps (no price clause in its text).
NO_CAP = 1000000
PRICE_SEED = 0
SHUFFLE_SEED = 233
MISSING_PRICE = 100.0


@dataclass(frozen=True)
class Product:
    asin: str
    name: str
    title: str
    description: str
    bullet_points: tuple[str, ...]
    price_tag: str
    pricing: tuple[float, ...]
    options: Mapping[str, tuple[str, ...]]
    attributes: tuple[str, ...]
    category: str
    query: str
    product_category: str
    instruction_text: str | None = None
    instruction_attributes: tuple[str, ...] | None = None
    main_image: str | None = None
    rating: str = "N.A."
    reviews: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Goal:
    index: int
    asin: str
    instruction_text: str
    attributes: tuple[str, ...]
    goal_options: Mapping[str, str]
    price_upper: float | int
    query: str
    category: str
    product_category: str
    name: str
    weight: float

    def record(self) -> dict[str, Any]:
        """The goal as upstream's dict (lists for tuples), e.g. to compare with a recording."""
        return {"index": self.index, "asin": self.asin, "instruction_text": self.instruction_text,
                "attributes": list(self.attributes), "goal_options": dict(self.goal_options),
                "price_upper": self.price_upper, "query": self.query, "category": self.category,
                "product_category": self.product_category, "name": self.name, "weight": self.weight}


@dataclass(frozen=True, eq=False)
class Catalog:
    """Compared and hashed by identity (one per data folder and process)."""

    products: Mapping[str, Product]
    prices: Mapping[str, float]
    goals: tuple[Goal, ...]
    human_instructions: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    root: Path | None = None

    def product(self, asin: str) -> Product:
        """The product of ``asin`` (upper or lower case, as the env's clickables lowercase it)."""
        try:
            return self.products[asin.upper()]
        except KeyError:
            raise KeyError(f"no product {asin!r} in the WebShop catalog ({len(self.products)} products)") from None


def _parse_pricing(raw: Any) -> tuple[tuple[float, ...], str]:
    if not raw:
        return (MISSING_PRICE,), f"${MISSING_PRICE}"
    prices = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in str(raw).split("$")[1:]]
    if len(prices) == 1:
        return (prices[0],), f"${prices[0]}"
    return tuple(prices[:2]), f"${prices[0]} to ${prices[1]}"


def _parse_options(raw: Any) -> dict[str, tuple[str, ...]]:
    options: dict[str, tuple[str, ...]] = {}
    if not raw:
        return options
    for name, contents in raw.items():
        if contents is None:
            continue
        options[name.lower()] = tuple(c["value"].strip().replace("/", " | ").lower() for c in contents)
    return options


def _product(raw: Mapping[str, Any], attrs: Mapping[str, Any], where: str) -> Product:
    try:
        pricing, tag = _parse_pricing(raw.get("pricing"))
        bullets = raw["small_description"]
        entry = attrs.get(raw["asin"], {})
        instruction_attributes = entry.get("instruction_attributes")
        images = raw.get("images") or [None]
        return Product(
            asin=raw["asin"], name=raw["name"], title=raw["name"], description=raw["full_description"],
            bullet_points=tuple(bullets) if isinstance(bullets, list) else (bullets,),
            price_tag=tag, pricing=pricing, options=_parse_options(raw.get("customization_options")),
            attributes=tuple(entry["attributes"]) if "attributes" in entry else ("DUMMY_ATTR",),
            category=raw["category"], query=raw["query"].lower().strip(), product_category=raw["product_category"],
            instruction_text=entry.get("instruction"),
            instruction_attributes=None if instruction_attributes is None else tuple(instruction_attributes),
            main_image=images[0])
    except (KeyError, TypeError, AttributeError, ValueError, ArithmeticError) as exc:
        raise data.WebShopDataError(f"{where}: product {raw.get('asin')!r} is malformed ({exc!r}). Fix: restore "
                                    "data/webshop/ from a clean checkout (see data/webshop/NOTICE.md).") from None


def env_prices(products: Mapping[str, Product], rng: random.Random) -> dict[str, float]:
    """The reward's price per product; ranges drawn uniformly from ``rng`` in catalog order."""
    return {asin: (p.pricing[0] if len(p.pricing) == 1 else rng.uniform(*p.pricing[:2]))
            for asin, p in products.items()}


def synthetic_goals(products: Mapping[str, Product], prices: Mapping[str, float], rng: random.Random,
                    shuffle_seed: int = SHUFFLE_SEED) -> tuple[Goal, ...]:
    """One goal per (product with an instruction) x (option value combination), shuffled by ``shuffle_seed``."""
    drafts: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for asin, p in products.items():
        if p.instruction_text is None:
            continue
        caps = [c for c in PRICE_CAPS if c > prices[asin]][:4]
        if len(caps) >= 2:
            cap: float | int = sorted(rng.sample(caps, 2))[1]
            price_text = f", and price lower than {cap:.2f} dollars"
        else:
            cap, price_text = NO_CAP, ""
        names = sorted(p.options)
        for combo in itertools.product(*(p.options[n] for n in names)):
            chosen = dict(zip(names, combo))
            option_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
            drafts.append({"asin": asin, "instruction_text": f"{p.instruction_text}"
                           f"{' with ' + option_text if option_text else ''}{price_text}",
                           "attributes": tuple(p.instruction_attributes or ()), "goal_options": chosen,
                           "price_upper": cap, "query": p.query, "category": p.category,
                           "product_category": p.product_category, "name": p.title})
            for att in drafts[-1]["attributes"]:
                counts[att] = counts.get(att, 0) + 1
    for d in drafts:
        d["weight"] = sum(1.0 / counts[a] for a in d["attributes"]) / len(d["attributes"])
    random.Random(shuffle_seed).shuffle(drafts)
    return tuple(Goal(index=i, **d) for i, d in enumerate(drafts))


def build_catalog(root: str | Path | None = None, price_seed: int = PRICE_SEED) -> Catalog:
    """Read, verify and assemble the catalog (uncached; :func:`load_catalog` caches it)."""
    folder = data.data_root(root)
    raw_products = data.read_json(data.CATALOG_FILE, folder)
    attrs = data.read_json(data.ATTRIBUTES_FILE, folder)
    human = data.read_json(data.HUMAN_INSTRUCTIONS_FILE, folder)
    where = str(folder / f"{data.CATALOG_FILE}.xz")
    products: dict[str, Product] = {}
    for raw in raw_products:
        asin = raw.get("asin") if isinstance(raw, dict) else None
        if not isinstance(asin, str):
            raise data.WebShopDataError(f"{where}: a record without an 'asin' string. Fix: restore data/webshop/ "
                                        "from a clean checkout.")
        if asin == "nan" or len(asin) > 10 or asin in products:
            continue  # upstream's load_products skips these too
        products[asin] = _product(raw, attrs, where)
    rng = random.Random(price_seed)
    prices = env_prices(products, rng)
    goals = synthetic_goals(products, prices, rng)
    return Catalog(products=products, prices=prices, goals=goals,
                   human_instructions={a: tuple(v) for a, v in human.items()}, root=folder)


@functools.lru_cache(maxsize=4)
def _cached(folder: Path) -> Catalog:
    return build_catalog(folder)


def load_catalog(root: str | Path | None = None) -> Catalog:
    """The catalog of ``root`` (default: the shipped ``data/webshop/``), built once per process."""
    return _cached(data.data_root(root))
