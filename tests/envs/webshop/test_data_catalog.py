"""WebShop's shipped data (SHA-256 checked, clear errors) and the catalog, prices and goals
against the recording of upstream's environment."""

from __future__ import annotations

import hashlib
import lzma
import shutil
from pathlib import Path

import pytest

from memtrials.envs.webshop import data
from memtrials.envs.webshop.catalog import build_catalog, load_catalog
from tests.envs.webshop.golden import GOLDEN, golden


def test_shipped_files_match_their_digests():
    digests = data.verify()
    assert set(digests) == set(data.REQUIRED)
    sums = dict(reversed(line.split()) for line in (GOLDEN / "SHA256SUMS").read_text().splitlines())
    for name, want in sums.items():  # the golden files too
        assert hashlib.sha256(lzma.open(GOLDEN / f"{name}.xz").read()).hexdigest() == want, name


@pytest.fixture()
def copy_root(tmp_path: Path) -> Path:
    root = tmp_path / "webshop"
    shutil.copytree(data.data_root(), root)
    return root


def test_missing_file_names_it_and_the_fix(copy_root: Path):
    (copy_root / "items_ins_v2_1000.json.xz").unlink()
    with pytest.raises(data.WebShopDataError, match=r"items_ins_v2_1000\.json\.xz: missing .*Fix: restore"):
        build_catalog(copy_root)


def test_altered_content_fails_the_digest(copy_root: Path):
    path = copy_root / "items_human_ins.subset_1000.json.xz"
    raw = lzma.open(path).read().replace(b"gluten free", b"gluten-free", 1)
    path.write_bytes(lzma.compress(raw, format=lzma.FORMAT_XZ))
    with pytest.raises(data.WebShopDataError, match=r"items_human_ins\.subset_1000\.json\.xz: SHA-256 .* expects"):
        build_catalog(copy_root)


def test_truncated_xz_is_reported_as_corrupt(copy_root: Path):
    path = copy_root / "doc_tokens.jsonl.xz"
    path.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(data.WebShopDataError, match=r"doc_tokens\.jsonl\.xz: not a readable xz file.*corrupt"):
        data.verify(copy_root)


def test_digest_list_problems(copy_root: Path, tmp_path: Path):
    sums = copy_root / "SHA256SUMS"
    sums.write_text("\n".join(l for l in sums.read_text().splitlines() if "doc_tokens" not in l) + "\n")
    with pytest.raises(data.WebShopDataError, match=r"SHA256SUMS: no digest for doc_tokens\.jsonl"):
        data.verify(copy_root)
    sums.write_text("not a digest line\n")
    with pytest.raises(data.WebShopDataError, match=r"SHA256SUMS, line 1: expected"):
        data.verify(copy_root)
    with pytest.raises(data.WebShopDataError, match=r"does not exist"):
        data.data_root(tmp_path / "nowhere")


def test_catalog_products_and_prices_equal_upstreams():
    cat = load_catalog()
    assert load_catalog() is cat  # built once per process
    rows = golden("product_prices")
    assert list(cat.products) == [r["asin"] for r in rows]
    for r in rows:
        p = cat.products[r["asin"]]
        assert (list(p.pricing), p.price_tag, cat.prices[r["asin"]]) == (r["pricing"], r["Price"], r["price"]), r
    assert sum(len(p.pricing) == 2 for p in cat.products.values()) == 93
    assert sum(p.instruction_text is not None for p in cat.products.values()) == 415
    assert cat.product("b0743jkhbv").asin == "B0743JKHBV"


def test_goals_equal_upstreams_field_by_field():
    cat = load_catalog()
    rows = golden("goals")
    assert len(cat.goals) == len(rows) == 6910
    for goal, row in zip(cat.goals, rows):
        assert goal.record() == row
    assert sum(not g.goal_options for g in cat.goals) == 185
    assert sum(g.price_upper == 1000000 for g in cat.goals) == 15


def test_a_different_price_seed_changes_only_range_prices_and_caps():
    other = build_catalog(price_seed=1)
    cat = load_catalog()
    changed = {a for a in cat.prices if other.prices[a] != cat.prices[a]}
    assert changed == {a for a, p in cat.products.items() if len(p.pricing) == 2}
    assert [g.asin for g in other.goals] == [g.asin for g in cat.goals]  # the shuffle has its own seed
