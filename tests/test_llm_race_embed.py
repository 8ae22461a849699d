"""Embeddings and token counts claimed across processes, as chat calls are: one paid call per key.

Two processes (two Snakemake jobs) embed and count the same texts at the same moment on
one cache, against a loopback endpoint slow enough that both miss the cache.  Before,
each process de-duplicated only its own requests and both paid (seen: two evaluation
jobs embedding the same task 17 ms apart); now each key is claimed before it is sent, so
the endpoint sees every text once, and both processes record the one stored reply.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memtrials.llm.cache import open_cache
from memtrials.testing import Faults, loopback_embed_endpoint, loopback_endpoint
from tests.conftest import RACE_BARRIER, race_two_cells

N = 12
CALLER = """
import asyncio, json, sys, time
from pathlib import Path
from memtrials.llm import open_client
from memtrials.llm.token_count import count_tokens
cfg, me, other = json.load(open(sys.argv[1])), Path(sys.argv[3]), Path(sys.argv[4])
texts = [f"text number {{i}} of the race" for i in range({n})]
async def main():
    async with open_client(cfg, "race/" + me.stem, None) as client:
{barrier}        # halves and singles as well as the whole list: batches of different shapes race
        got = await asyncio.gather(client.embed("emb", texts), client.embed("emb", texts[::2]),
                                   *(client.embed("emb", [t]) for t in texts[:3]))
        counts = await count_tokens(client, "loop", texts)
        vectors = [row.tolist() for row in got[0].vectors]
        print(json.dumps({{"fresh": client.fresh_calls, "counts": counts, "vectors": vectors}}))
asyncio.run(main())
""".format(n=N, barrier=RACE_BARRIER.strip("\n") + "\n")


def _race(cfg: dict, tmp: Path, tag: str) -> dict[str, dict]:
    return race_two_cells(CALLER, cfg, tmp, tag)


@pytest.mark.parametrize("backend", ["sqlite", "shards"])
def test_two_racing_processes_pay_each_embedding_and_count_once(loopback, make_config, tmp_path, backend):
    srv = loopback(faults=Faults(latency_s=0.5))  # both processes send well within it
    cfg = make_config(srv)
    cfg["cache"]["backend"] = backend
    models = Path(cfg["models_file"])
    entries = yaml.safe_load(models.read_text())["endpoints"]
    entries["emb"] = loopback_embed_endpoint(srv, batch_size=4, price_per_mtok=1.0)
    models.write_text(yaml.safe_dump({"endpoints": entries}))
    assert entries["loop"] == loopback_endpoint(srv)

    got = _race(cfg, tmp_path, "go")
    # every text embedded once and counted once, whichever process claimed it
    assert srv.stats.embedded_texts == N
    assert srv.stats.tokenize_requests == N
    assert got["a"]["fresh"] + got["b"]["fresh"] == 2 * N
    assert got["a"]["counts"] == got["b"]["counts"] == [6] * N
    assert got["a"]["vectors"] == got["b"]["vectors"]
    cache = open_cache(cfg["cache"]["path"], backend=backend)
    assert len(cache.records()) == 2 * N
    ledger = {endpoint: calls for endpoint, calls, *_ in cache.totals()}
    assert ledger == {"emb": N, "loop": N}  # one paid call per key in the ledger
    cache.close()

    srv.reset_stats()
    again = _race(cfg, tmp_path, "again")  # a rerun replays: no request
    assert srv.stats.requests == 0 and srv.stats.tokenize_requests == 0
    assert again["a"]["fresh"] == again["b"]["fresh"] == 0
