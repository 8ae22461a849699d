"""Planted endpoints (provider planted): the loopback server in process, behind the real
client, cache and records; the policy's path, params and source are the cache identity."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from memtrials.config import ConfigError, load_models
from memtrials.envs import make_env
from memtrials.envs.planted import agent
from memtrials.llm import open_client

from tests.conftest import REPO, base_config

READER = "memtrials.envs.planted.agent:reader"


def _registry(tmp_path: Path, params: dict | None = None, policy: str = READER, name: str = "planted-test") -> Path:
    entry = {"provider": "planted", "model": "planted-reader", "planted": {"policy": policy, "params": params or {}},
             "max_concurrency": 8, "params": {"temperature": 1.0, "max_tokens": 32, "seed": 0},
             "structured_output": True, "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}}
    path = tmp_path / f"models-{abs(hash(str(params)))}.yaml"
    shipped = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["endpoints"]
    path.write_text(yaml.safe_dump({"endpoints": {**shipped, name: entry}}))
    return path


def _config(tmp_path: Path, models: Path) -> dict:
    cfg = copy.deepcopy(base_config())
    cfg["models_file"] = str(models)
    cfg["panel"] = ["planted-test"]
    cfg["roles"] = {role: ("planted-test" if role != "embedder" else model) for role, model in cfg["roles"].items()}
    cfg["cache"] = {"path": str(tmp_path / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"}
    return cfg


def _prompts(n: int) -> list[tuple[list[dict], list[str]]]:
    env = make_env("planted")
    out = []
    for i in range(n):
        obs = env.reset(f"test-{('vault', 'relay', 'depot')[i % 3]}-{i:04d}")
        text = f"Task: {env.task_description()}\nObservation: {obs.text}\nChoose the next action."
        out.append(([{"role": "user", "content": text}], list(obs.admissible)))
    return out


async def _play(cfg: dict, records: Path, prompts, samples: int = 2):
    async with open_client(cfg, "planted/cell", records) as client:
        replies = []
        for messages, choices in prompts:
            for s in range(samples):
                r = await client.complete("planted-test", messages, choices=choices, sample=s)
                replies.append(r.text)
        server = client.server("planted-test") if client.fresh_calls else None
        return replies, client.fresh_calls, (server.requests if server else 0)


def test_calls_go_through_the_client_and_a_rerun_replays_from_the_cache(tmp_path):
    cfg = _config(tmp_path, _registry(tmp_path, {"p_right": 0.6}))
    prompts = _prompts(60)
    first, fresh, served = asyncio.run(_play(cfg, tmp_path / "a.parquet", prompts))
    assert fresh == served == 120
    again, fresh2, _ = asyncio.run(_play(cfg, tmp_path / "b.parquet", prompts))
    assert again == first and fresh2 == 0
    rec = pq.read_table(tmp_path / "a.parquet").to_pandas()
    assert len(rec) == 120 and (rec["endpoint"] == "planted-test").all()
    # the planted rate shows in the replies (120 draws, p = 0.6)
    right = [reply == agent.right_option(agent.current_code(m[0]["content"]), c)
             for (m, c) in prompts for reply in first[prompts.index((m, c)) * 2:prompts.index((m, c)) * 2 + 2]]
    assert 0.45 < sum(right) / len(right) < 0.75


def test_the_server_replays_byte_for_byte_without_the_cache(tmp_path):
    prompts = _prompts(20)
    a = asyncio.run(_play(_config(tmp_path / "one", _registry(tmp_path, {"p_right": 0.5})), tmp_path / "a.parquet", prompts))
    b = asyncio.run(_play(_config(tmp_path / "two", _registry(tmp_path, {"p_right": 0.5})), tmp_path / "b.parquet", prompts))
    assert a[1] == b[1] == 40 and a[0] == b[0]
    # the sample index (its seed) changes the draw
    assert [x for x in a[0][0::2]] != [x for x in a[0][1::2]]


def test_the_identity_holds_the_policy_its_params_and_its_source_digest(tmp_path):
    ep = load_models(_registry(tmp_path, {"p_right": 0.6}))["planted-test"]
    other = load_models(_registry(tmp_path, {"p_right": 0.7}))["planted-test"]
    ident = ep.identity
    assert ident["planted"] == READER and ident["planted_params"] == {"p_right": 0.6}
    assert len(ident["policy_sha256"]) == 64 and "base_url" not in ident
    assert other.identity != ident and other.cell_params() != ep.cell_params()


def test_a_changed_policy_source_changes_the_identity(tmp_path, monkeypatch):
    pkg = tmp_path / "plantedpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    module = pkg / "pol.py"
    module.write_text("def make():\n    return lambda body: 'a'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = _registry(tmp_path, policy="plantedpkg.pol:make")
    before = load_models(path)["planted-test"].identity
    module.write_text("def make():\n    return lambda body: 'b'  # changed\n")
    after = load_models(path)["planted-test"].identity
    assert before["policy_sha256"] != after["policy_sha256"]


@pytest.mark.parametrize("entry, match", [
    ({"planted": None}, "goes with provider planted"),
    ({"base_url": "http://127.0.0.1:1/v1"}, "not allowed for provider planted"),
    ({"planted": {"policy": "memtrials.no_such_module:f"}}, "was not found"),
    ({"planted": {"policy": "not a path"}}, "planted.policy"),
])
def test_bad_planted_entries_name_the_key_and_the_fix(tmp_path, entry, match):
    raw = yaml.safe_load(_registry(tmp_path).read_text())
    raw["endpoints"]["planted-test"].update(entry)
    raw["endpoints"] = {"planted-test": {k: v for k, v in raw["endpoints"]["planted-test"].items() if v is not None}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=match):
        load_models(path)


def test_params_that_do_not_fit_the_factory_fail_before_a_call(tmp_path):
    from memtrials.llm.check import preflight

    models = load_models(_registry(tmp_path, {"no_such_param": 1}))
    with pytest.raises(ConfigError, match="planted.params"):
        preflight({}, models, ["planted-test"])
