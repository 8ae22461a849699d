"""A provider's prefix-cache figure is kept and priced (issue 39, "Paper scale, measured").

The records keep ``usage.prompt_tokens_details.cached_tokens`` where the endpoint returns it
(the loopback server plays a provider's prefix cache with ``prefix_cache``), the record's
``cost`` prices those tokens at the registry's ``price.cached_input_per_mtok``, and ``spend``
(which sums the ledger of those costs) shows the same dollars.
"""

from __future__ import annotations

import asyncio

import pytest
import yaml

from memtrials.__main__ import main as cli
from memtrials.config.models import Price
from memtrials.llm import open_client, read_records

from tests.conftest import REPO

PRICE = {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0, "cached_input_per_mtok": 100.0}


def test_price_takes_cached_tokens_at_their_price_only_where_the_registry_gives_one():
    assert Price(1.0, 2.0).cost(100, 10, cached_tokens=80) == pytest.approx((100 * 1.0 + 10 * 2.0) / 1e6)
    assert Price(1.0, 2.0, 0.1).cost(100, 10, cached_tokens=80) == pytest.approx((20 + 80 * 0.1 + 20) / 1e6)
    assert Price(1.0, 2.0, 0.1).cost(100, 0, cached_tokens=500) == pytest.approx(100 * 0.1 / 1e6)  # at most all


def test_records_keep_cached_tokens_and_spend_prices_them(loopback, make_config, tmp_path, capsys):
    srv = loopback(prefix_cache=8)
    cfg = make_config(srv)
    models = yaml.safe_load(open(cfg["models_file"]))
    models["endpoints"]["loop"]["price"] = PRICE
    open(cfg["models_file"], "w").write(yaml.safe_dump(models))
    shared = "alpha " * 200

    async def main():
        async with open_client(cfg, "tests/cached", tmp_path / "calls.parquet") as client:
            for tail in ("one", "two"):
                await client.complete("loop", [{"role": "user", "content": shared + tail}], purpose="probe")

    asyncio.run(main())
    recs = read_records(tmp_path / "calls.parquet").to_pandas().sort_values("started_at")
    assert list(recs["prompt_tokens"]) == [201, 201]
    assert list(recs["cached_tokens"]) == [0, 200]  # the second repeats the first's 200 whole words
    want = [(201 * 1000.0 + c * 2000.0) / 1e6 for c in recs["completion_tokens"][:1]]
    want.append((1 * 1000.0 + 200 * 100.0 + recs["completion_tokens"].iloc[1] * 2000.0) / 1e6)
    assert list(recs["cost"]) == pytest.approx(want)
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"cache": cfg["cache"]}))  # spend reads the cache's ledger
    assert cli(["spend", "--config", str(REPO / "config/config.yaml"), "--configfile", str(overlay)]) == 0
    last = capsys.readouterr().out.splitlines()[-1].split()
    assert last[0] == "loop" and last[1] == "2" and float(last[-1]) == pytest.approx(sum(want), abs=1e-4)
