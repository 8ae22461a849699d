"""The SFT recipe end to end on CPU (section 6.1's recipe, a tiny model): the training entry
point, run with the training environment's interpreter (``.venv-train``, made by bin/setup
from envs/train.txt), fine-tunes a randomly initialised Qwen3-family model built from a
config with a tokenizer built locally (no download); the loss decreases and the written
checkpoint loads back and is recognised as the training rule's (its digest)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.views import Entry
from memtrials.studies.history.calibrator.contexts import Context
from memtrials.studies.history.calibrator.labels import target_text
from memtrials.studies.history.calibrator.rollouts import calibrator_label, checkpoint_digest, trained_endpoints
from tests.conftest import REPO, base_config

PY = REPO / ".venv-train" / "bin" / "python"
PKG = REPO / "src/memtrials/studies/history/calibrator"


def _dataset(path: Path) -> None:
    """Twelve G.2 review prompts with targets of both kinds (the dataset rule's line format)."""
    hp = ActorPrompts.load(REPO / "config/prompts/actor")
    lines = []
    for i in range(12):
        c = Context(f"c{i}", "m", "alfworld", "t", "e", "put a mug in the fridge", 1,
                    (Entry("You are in the kitchen.", f"go to shelf {i}"),), f"go to shelf {i}",
                    f"On the shelf {i}, you see a mug {i % 3}.", None)
        msgs = hp.review_messages(env=c.env, task=c.task, history=c.review_history(), action=c.action,
                                  observation=c.observation)
        tgt = target_text("CALIBRATE", f"Mug {i % 3} is on shelf {i}.") if i % 2 else target_text("NOUPDATE", None)
        lines.append(json.dumps({"context_id": c.context_id, "prompt": msgs, "target": tgt,
                                 "messages": [*msgs, {"role": "assistant", "content": tgt}]}))
    path.write_text("\n".join(lines) + "\n")


def _run(*args: str) -> str:
    assert PY.exists(), (f"{PY} is missing: bin/setup creates it from envs/train.txt "
                         "(run bin/setup, or the train block of it)")
    p = subprocess.run([str(PY), *args], capture_output=True, text=True, timeout=600, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


@pytest.mark.slow

def _train_tiny(tmp_path, data, **updates):
    """Write the dataset, make the tiny model with the default recipe plus ``updates``, train it
    with the SFT entry point; ``(checkpoint folder, its manifest)``."""
    _dataset(data)
    train = base_config()["calibrator"]["train"]
    recipe = {k: v for k, v in train.items() if k not in ("enabled", "python", "variants", "resources")}
    recipe.update(updates)
    (tmp_path / "base.json").write_text(json.dumps(recipe))
    _run(str(PKG / "tiny.py"), "--dataset", str(data), "--out", str(tmp_path / "tiny"),
         "--recipe-from", str(tmp_path / "base.json"))
    out = tmp_path / "sft"
    _run("-m", "memtrials.studies.history.calibrator.sft", "--recipe", str(tmp_path / "tiny/recipe.json"),
         "--dataset", str(data), "--out", str(out))
    return out, json.loads((out / "memtrials-sft.json").read_text())

def test_sft_recipe_on_a_tiny_qwen3_loss_decreases_and_the_checkpoint_loads(tmp_path):
    data = tmp_path / "full.jsonl"
    # the default recipe (fp32, every block of the tiny model, 3 epochs), with a step size and batch
    # that a randomly initialised 2-layer model learns from in a few steps
    out, man = _train_tiny(tmp_path, data, learning_rate=3e-3, batch_size=4, grad_accum=1, max_length=1024,
                           max_steps=None, train_layers=None, label="tiny Qwen3")
    losses = [x["loss"] for x in man["losses"]]
    assert man["examples"] == 12 and len(losses) == 9          # 3 epochs x 3 steps
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.1, losses
    assert man["trained_by"] == "calibrator_sft" and man["recipe"]["model_config"]["model_type"] == "qwen3"
    assert checkpoint_digest(out / "checkpoint") == man["digest"]
    # the checkpoint loads back (model and tokenizer) and scores the training text better than chance
    check = (
        "import json,sys,math,torch\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        f"m=AutoModelForCausalLM.from_pretrained({str(out / 'checkpoint')!r}); t=AutoTokenizer.from_pretrained({str(out / 'checkpoint')!r})\n"
        "assert type(m).__name__=='Qwen3ForCausalLM'\n"
        f"row=json.loads(open({str(data)!r}).readline())\n"
        "ids=torch.tensor([t(row['target'])['input_ids']])\n"
        "loss=m(input_ids=ids,labels=ids).loss.item()\n"
        "print(json.dumps({'loss':loss,'chance':math.log(len(t))}))\n")
    res = json.loads(_run("-c", check).strip().splitlines()[-1])
    assert res["loss"] < res["chance"]
    # a registry entry naming this folder is the trained calibrator in every table
    assert trained_endpoints({"cal": str(out)}) == {"cal": {"digest": man["digest"], "examples": 12,
                                                            "label": "tiny Qwen3"}}
    assert calibrator_label(["cal"], trained_endpoints({"cal": str(out)})) == "Calibrator (trained: tiny Qwen3 on 12 examples)"
    (out / "checkpoint" / "model.safetensors").write_bytes(b"tampered")
    assert calibrator_label(["cal"], trained_endpoints({"cal": str(out)})) == "Calibrator (untrained stand-in: cal)"


@pytest.mark.slow
def test_recipe_at_the_papers_learning_rate_changes_every_trainable_element_and_the_loss_falls(tmp_path):
    """fp32 master weights: at lr 1e-5 (the paper's) no update rounds away (bf16 weights lost
    most of them); refusals name their keys."""
    data = tmp_path / "full.jsonl"
    _dataset(data)
    train = base_config()["calibrator"]["train"]
    recipe = {k: v for k, v in train.items() if k not in ("enabled", "python", "variants", "resources")}
    recipe.update(learning_rate=1e-5, batch_size=4, grad_accum=1, max_length=1024, max_steps=6, train_layers=None)
    (tmp_path / "base.json").write_text(json.dumps(recipe))
    _run(str(PKG / "tiny.py"), "--dataset", str(data), "--out", str(tmp_path / "tiny"),
         "--recipe-from", str(tmp_path / "base.json"))
    out = tmp_path / "sft"
    stdout = _run("-m", "memtrials.studies.history.calibrator.sft", "--recipe", str(tmp_path / "tiny/recipe.json"),
                  "--dataset", str(data), "--out", str(out))
    man = json.loads((out / "memtrials-sft.json").read_text())
    assert man["steps"] == 6 and man["trainable_changed_fraction"] >= 0.99, man["trainable_changed_fraction"]
    assert man["loss_after"] < man["loss_before"], (man["loss_before"], man["loss_after"])
    assert man["memory_estimate"]["optimizer_state"] == 8 * man["memory_estimate"]["n_trainable"]
    # the CPU above cpu_max_params is refused unless allow_cpu, naming both keys
    tiny = json.loads((tmp_path / "tiny/recipe.json").read_text())
    (tmp_path / "big.json").write_text(json.dumps({**tiny, "cpu_max_params": 1000}))
    p = subprocess.run([str(PY), "-m", "memtrials.studies.history.calibrator.sft", "--recipe", str(tmp_path / "big.json"),
                        "--dataset", str(data), "--out", str(tmp_path / "big")], capture_output=True, text=True,
                       timeout=600, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert p.returncode != 0 and "calibrator.train.cpu_max_params" in p.stderr and "calibrator.train.allow_cpu" in p.stderr
    # a model whose estimate exceeds the device's memory is refused before training
    (tmp_path / "long.json").write_text(json.dumps({**tiny, "max_length": 4_000_000}))
    p = subprocess.run([str(PY), "-m", "memtrials.studies.history.calibrator.sft", "--recipe", str(tmp_path / "long.json"),
                        "--dataset", str(data), "--out", str(tmp_path / "long")], capture_output=True, text=True,
                       timeout=600, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert p.returncode != 0 and "exceeds" in p.stderr and "calibrator.train.max_length" in p.stderr
    assert "memory estimate (GiB)" in p.stdout


def test_a_checkpoint_endpoint_is_named_by_its_manifest_digest(tmp_path):
    """The registry's embedded checkpoint entry: the manifest the training entry point writes is
    the one the config layer reads; the cell params name the folder (it may not exist yet), the
    cache identity and the recorded model the digest, read when used; bad entries are refused."""
    from memtrials.config import ConfigError, parse_models
    from memtrials.config.models import CHECKPOINT_MANIFEST
    from memtrials.studies.history.calibrator.sft import MANIFEST

    assert MANIFEST == CHECKPOINT_MANIFEST
    entry = {"provider": "embedded", "model": "m", "embedded": {"checkpoint": str(tmp_path)}, "max_concurrency": 1,
             "params": {}, "structured_output": True, "price": {"input_per_mtok": 0, "output_per_mtok": 0}}
    ep = parse_models({"endpoints": {"cal": entry}})["cal"]
    assert ep.cell_params()["identity"] == {"checkpoint_folder": str(tmp_path), "model": "m"}
    with pytest.raises(ConfigError, match="no memtrials-sft.json"):
        ep.identity
    (tmp_path / MANIFEST).write_text(json.dumps({"digest": "d1", "gguf": "checkpoint/model.gguf", "gguf_sha256": "x"}))
    assert ep.identity == {"checkpoint": "d1", "model": "m"} and ep.served_alias == "m@d1"
    os.utime(tmp_path / MANIFEST, ns=(1, 1))
    (tmp_path / MANIFEST).write_text(json.dumps({"digest": "d2", "gguf": "checkpoint/model.gguf", "gguf_sha256": "y"}))
    assert ep.identity == {"checkpoint": "d2", "model": "m"}  # retrained: a new identity, so new cache keys
    bad = {**entry, "embedded": {"checkpoint": str(tmp_path), "sha256": "0" * 64}}
    with pytest.raises(ConfigError, match="excludes"):
        parse_models({"endpoints": {"cal": bad}})


@pytest.mark.slow
def test_lora_option_trains_adapters_and_writes_the_merged_model(tmp_path):
    """method: lora (peft): only the adapters train, the loss falls, and the checkpoint is the
    merged model, loadable without peft (no adapter tensors left)."""
    data = tmp_path / "full.jsonl"
    lora = {**base_config()["calibrator"]["train"]["lora"], "r": 2, "alpha": 4}  # rank 2: the tiny model is 32 wide
    out, man = _train_tiny(tmp_path, data, method="lora", learning_rate=3e-3, batch_size=4, max_length=1024,
                           max_steps=4, train_layers=None, lora=lora)
    est = man["memory_estimate"]
    assert 0 < est["n_trainable"] < est["n_parameters"] / 4 and man["loss_after"] < man["loss_before"]
    check = ("import safetensors.torch as st\n"
             f"keys = st.load_file({str(out / 'checkpoint' / 'model.safetensors')!r}).keys()\n"
             "assert keys and not [k for k in keys if 'lora' in k], keys\nprint('MERGED')\n")
    assert "MERGED" in _run("-c", check)
