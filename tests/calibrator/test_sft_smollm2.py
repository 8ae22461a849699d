"""The default's training path for real, on a tiny slice: the embedded SmolLM2-135M (weights
from the shipped GGUF) fine-tuned on CPU by the SFT entry point with the default recipe
(top 2 blocks, fp32, gradient checkpointing), exported back to GGUF, served by the embedded
llama.cpp runtime and asked through the pipeline's client.  Checks behaviour, not only loss:
held-out G.2 review prompts' free-text replies parse as one of the two G.2 outputs more often
after training than before; the recipe's rate changes every trainable element; a retrain
under the same endpoint name gets new cache keys (no reply replayed) and the label follows
the digest recorded with the calls."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from memtrials.agent.prompts import ActorPrompts, parse_review
from memtrials.agent.views import Entry
from memtrials.llm import open_client, read_records
from memtrials.studies.history.calibrator.contexts import Context
from memtrials.studies.history.calibrator.labels import target_text
from memtrials.studies.history.calibrator.rollouts import calibrator_label, trained_endpoints
from tests.conftest import REPO, base_config, embedded_config

PY = REPO / ".venv-train" / "bin" / "python"
OBJECTS = ["mug", "apple", "key", "book", "plate", "lamp", "cup", "pen"]


def _rows(start: int, n: int) -> list[dict]:
    """G.2 review prompts rendered by the pipeline's own renderer, with targets of both kinds."""
    hp = ActorPrompts.load(REPO / "config/prompts/actor")
    rows = []
    for i in range(start, start + n):
        obj = OBJECTS[i % len(OBJECTS)]
        c = Context(f"c{i}", "m", "alfworld", "t", "e", f"put a {obj} in the fridge", 1,
                    (Entry("You are in the kitchen.", f"go to shelf {i}"),), f"go to shelf {i}",
                    f"On the shelf {i}, you see a {obj} {i % 3}.", None)
        msgs = hp.review_messages(env=c.env, task=c.task, history=c.review_history(), action=c.action,
                                  observation=c.observation)
        tgt = target_text("CALIBRATE", f"The {obj} is on shelf {i}.") if i % 2 else target_text("NOUPDATE", None)
        rows.append({"context_id": c.context_id, "env": "alfworld", "task_id": "t", "prompt": msgs, "target": tgt,
                     "messages": [*msgs, {"role": "assistant", "content": tgt}]})
    return rows


def _train(recipe: dict, data: Path, out: Path) -> dict:
    assert PY.exists(), f"{PY} is missing: bin/setup creates it from envs/train.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    (out.parent / "recipe.json").write_text(json.dumps(recipe))
    p = subprocess.run([str(PY), "-m", "memtrials.studies.history.calibrator.sft", "--recipe",
                        str(out.parent / "recipe.json"), "--dataset", str(data), "--out", str(out)],
                       capture_output=True, text=True, timeout=900, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "memory estimate (GiB): parameters" in p.stdout
    return json.loads((out / "memtrials-sft.json").read_text())


def _ask(cfg: dict, endpoint: str, prompts: list, cell: str, records: Path) -> list[str]:
    async def run():
        async with open_client(cfg, cell, records) as client:
            return [(await client.complete(endpoint, p, max_tokens=48, purpose="review")).text for p in prompts]
    return asyncio.run(run())


def _parse_rate(texts: list[str]) -> float:
    def ok(t: str) -> bool:
        try:
            return parse_review(json.loads(t.strip()))[0] != "INVALID"
        except (ValueError, AttributeError, TypeError):
            return False
    return sum(map(ok, texts)) / len(texts)


@pytest.mark.slow
def test_smollm2_trains_on_cpu_serves_through_the_client_and_a_retrain_replays_nothing(tmp_path):
    from memtrials.config import load_models
    from memtrials.llm.local.embedded import weights_path

    data = tmp_path / "full.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows(0, 8)))
    held_out = [r["prompt"] for r in _rows(100, 4)]
    gguf = weights_path(load_models(REPO / "config/models.yaml")["smollm2"].embedded)
    train = base_config()["calibrator"]["train"]
    recipe = {k: v for k, v in train.items() if k not in ("enabled", "python", "variants", "resources")}
    recipe.update(base_model=str(gguf))  # the default recipe: 12 steps of 2 examples
    folder = tmp_path / "sft" / "full"
    man = _train(recipe, data, folder)
    assert man["examples"] == 8 and man["steps"] == 12 and man["gguf_tensors_trained"] == 18
    assert man["trainable_changed_fraction"] >= 0.99 and man["loss_after"] < man["loss_before"], man
    # serve the base and the trained checkpoint through the pipeline's client (free text, no schema)
    cfg = embedded_config(tmp_path)
    reg = yaml.safe_load((REPO / "config/models.yaml").read_text())
    reg["endpoints"]["cal"] = {**reg["endpoints"]["smollm2-calibrator"],
                               "embedded": {"checkpoint": str(folder), "ctx_size": 4096, "threads": 2}}
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(reg))
    cfg["models_file"] = str(tmp_path / "models.yaml")
    before = _ask(cfg, "smollm2", held_out, "t/base", tmp_path / "base.calls.parquet")
    after = _ask(cfg, "cal", held_out, "t/cal", tmp_path / "cal1.calls.parquet")
    rate_before, rate_after = _parse_rate(before), _parse_rate(after)
    print(f"G.2 parse rate on held-out prompts: before {rate_before:.2f}, after {rate_after:.2f}")
    assert rate_after > rate_before, (before, after)
    rec1 = read_records(tmp_path / "cal1.calls.parquet").to_pydict()
    assert set(rec1["model"]) == {f"smollm2-135m-instruct@{man['digest']}"}
    ok = trained_endpoints({"cal": str(folder)}, {"cal": [str(tmp_path / "cal1.calls.parquet")]}, ["cal"])
    assert calibrator_label(["cal"], ok) == "Calibrator (trained: SmolLM2-135M on 8 examples)"
    # retrain under the same name: new digest, so the same prompts are asked afresh, never replayed
    man2 = _train({**recipe, "seed": 1, "max_steps": 2}, data, folder)
    assert man2["digest"] != man["digest"]
    _ask(cfg, "cal", held_out, "t/cal2", tmp_path / "cal2.calls.parquet")
    rec2 = read_records(tmp_path / "cal2.calls.parquet").to_pydict()
    assert set(rec2["model"]) == {f"smollm2-135m-instruct@{man2['digest']}"}
    assert not set(rec2["request_digest"]) & set(rec1["request_digest"])
    # the label follows the recorded digest: the old calls no longer count as the trained model's
    assert trained_endpoints({"cal": str(folder)}, {"cal": [str(tmp_path / "cal1.calls.parquet")]}, ["cal"]) == {}
    assert "cal" in trained_endpoints({"cal": str(folder)}, {"cal": [str(tmp_path / "cal2.calls.parquet")]}, ["cal"])


@pytest.mark.slow
def test_gguf_export_round_trips_the_trained_weights_exactly(tmp_path):
    """Perturbed top-block weights (q/k included, whose rows llama.cpp orders differently)
    written into a copy of the shipped GGUF load back through transformers bit for bit, and
    every other tensor is the base's."""
    from memtrials.config import load_models
    from memtrials.llm.local.embedded import weights_path

    gguf = weights_path(load_models(REPO / "config/models.yaml")["smollm2"].embedded)
    script = f"""
import torch
from transformers import AutoModelForCausalLM
from memtrials.studies.history.calibrator.sft_model import load_model, select_trainable, trainable_names
from memtrials.studies.history.calibrator.sft_gguf import export_gguf
r = {{"base_model": {str(gguf)!r}, "seed": 0, "method": "full", "train_layers": 1}}
m, _ = load_model(r); m = select_trainable(m, r); names = trainable_names(m)
torch.manual_seed(0)
with torch.no_grad():
    for n, p in m.named_parameters():
        if p.requires_grad: p.add_(torch.randn_like(p) * 0.01)
export_gguf(r["base_model"], {str(tmp_path / 'rt.gguf')!r}, {{n: p.detach().numpy() for n, p in m.named_parameters() if n in names}}, names, m.config)
back = dict(AutoModelForCausalLM.from_pretrained({str(tmp_path)!r}, gguf_file="rt.gguf", dtype=torch.float32).named_parameters())
bad = [n for n, p in m.named_parameters() if not torch.equal(p.detach(), back[n].detach())]
assert len(names) == 9 and not bad, bad
print("ROUND TRIP OK")
"""
    p = subprocess.run([str(PY), "-c", script], capture_output=True, text=True, timeout=600, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_WAIT_POLICY": "PASSIVE"})
    assert p.returncode == 0 and "ROUND TRIP OK" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
