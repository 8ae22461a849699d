"""Supervised fine-tuning of the calibrator (section 6.1: Qwen3-8B, 3 epochs, learning rate
1e-5) on the label chain's chat-format JSONL.  Runs in its own environment
(``envs/train.txt``, ``.venv-train``) as a module with ``src`` on ``PYTHONPATH``; with
:mod:`.sft_model` and :mod:`.sft_gguf` it imports only the standard library, torch,
transformers, peft and gguf::

    PYTHONPATH=src .venv-train/bin/python -m memtrials.studies.history.calibrator.sft \\
        --recipe recipe.json --dataset results/calibrator/dataset/full.jsonl --out DIR

The loss is on the target (the assistant turn) only; the prompt is the Appendix G.2 review
rendered with the base model's chat template.  ``recipe.json`` is ``calibrator.train`` less
the rule's plumbing (:data:`RECIPE_KEYS`); ``base_model`` is a Hugging Face id, a local folder
or a GGUF file (the rule resolves an embedded registry endpoint to its GGUF); ``init:
"random"`` with ``model_config`` and ``tokenizer`` builds a randomly initialised model instead
(the CPU test).  Master weights and AdamW state are fp32 (``bf16``: autocast on a GPU only);
the memory estimate is printed and checked before training (:func:`.sft_model.check_fits`).
Writes ``DIR/checkpoint/`` (``model.gguf`` for a GGUF base, the base file with the trained
tensors; else ``save_pretrained``) and ``DIR/memtrials-sft.json`` (recipe, per-step losses,
mean training loss before and after, trainable elements changed, the memory estimate, the
checkpoint's content digest, ``trained_by: calibrator_sft``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

MANIFEST = "memtrials-sft.json"
TRAINED_BY = "calibrator_sft"
RECIPE_KEYS = ("base_model", "epochs", "max_steps", "learning_rate", "batch_size", "grad_accum", "max_length", "bf16",
               "seed", "method", "train_layers", "lora", "gradient_checkpointing", "cpu_max_params", "allow_cpu")
GGUF_FILE = "model.gguf"


def read_jsonl(path: str) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                row = json.loads(line)
                if not isinstance(row.get("prompt"), list) or not isinstance(row.get("target"), str):
                    raise ValueError(f"{path}:{n}: each line needs 'prompt' (a list of messages) and 'target' (text)")
                rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no examples (the label chain produced an empty dataset)")
    return rows


def encode(tok: Any, row: dict[str, Any], max_length: int) -> dict[str, list[int]]:
    """Prompt ids (chat template, generation prompt) + target ids + EOS; labels -100 on the prompt."""
    prompt = tok.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
    if isinstance(prompt, dict):  # newer tokenizers return a BatchEncoding
        prompt = prompt["input_ids"]
    target = tok(row["target"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    room = max_length - len(target)
    if room < 1:
        raise ValueError(f"example {row.get('context_id')}: target alone is longer than max_length={max_length}")
    prompt = list(prompt)[-room:]
    return {"input_ids": prompt + target, "labels": [-100] * len(prompt) + target}


def weight_files(folder: Path) -> list[Path]:
    """The weight files of a checkpoint folder (``*.safetensors``, ``*.bin``, ``*.gguf``), sorted."""
    return sorted(q for q in folder.iterdir() if q.suffix in (".safetensors", ".bin", ".gguf") and q.is_file())


def weights_digest(folder: Path) -> str:
    """SHA-256 over the weight files of a checkpoint folder (name and bytes, in order); the
    manifest's ``digest``, which :func:`memtrials.studies.history.calibrator.rollouts.trained_endpoints`
    checks."""
    h = hashlib.sha256()
    for p in weight_files(folder):
        h.update(p.name.encode())
        with p.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def train(recipe: dict[str, Any], dataset: str, out: str) -> dict[str, Any]:
    import time

    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed

    from memtrials.studies.history.calibrator.sft_model import check_fits, load_model, select_trainable, \
        trainable_names

    missing = [k for k in RECIPE_KEYS if k not in recipe]
    if missing:
        raise ValueError(f"recipe: missing key(s) {missing} (config key calibrator.train)")
    t0 = time.monotonic()
    set_seed(int(recipe["seed"]))
    model, tok = load_model(recipe)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = select_trainable(model, recipe)
    names = trainable_names(model)
    rows = [encode(tok, r, int(recipe["max_length"])) for r in read_jsonl(dataset)]
    fits = check_fits(model, recipe, log=lambda m: print(m, flush=True))
    gpu = torch.cuda.is_available()
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad} \
        if fits["n_trainable"] <= 2e8 else None
    pad = int(tok.pad_token_id)

    def collate(batch: list[dict[str, list[int]]]) -> dict[str, Any]:
        n = max(len(b["input_ids"]) for b in batch)
        ids = [b["input_ids"] + [pad] * (n - len(b["input_ids"])) for b in batch]
        labels = [b["labels"] + [-100] * (n - len(b["labels"])) for b in batch]
        mask = [[1] * len(b["input_ids"]) + [0] * (n - len(b["input_ids"])) for b in batch]
        return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labels), "attention_mask": torch.tensor(mask)}

    losses: list[dict[str, float]] = []

    class Losses(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "loss" in logs:
                losses.append({"step": int(state.global_step), "loss": float(logs["loss"])})

    outdir = Path(out)
    ckpt_gc = bool(recipe["gradient_checkpointing"])
    args = TrainingArguments(
        output_dir=str(outdir / "trainer"), num_train_epochs=float(recipe["epochs"]),
        max_steps=int(recipe["max_steps"]) if recipe["max_steps"] else -1,
        learning_rate=float(recipe["learning_rate"]), per_device_train_batch_size=int(recipe["batch_size"]),
        gradient_accumulation_steps=int(recipe["grad_accum"]), bf16=bool(recipe["bf16"]) and gpu,
        gradient_checkpointing=ckpt_gc, gradient_checkpointing_kwargs={"use_reentrant": False} if ckpt_gc else None,
        logging_steps=1, save_strategy="no", report_to=[], seed=int(recipe["seed"]), data_seed=int(recipe["seed"]),
        use_cpu=not gpu, remove_unused_columns=False, lr_scheduler_type="constant", optim="adamw_torch",
        dataloader_num_workers=0, disable_tqdm=True)
    def mean_loss() -> float | None:
        """Mean loss over the training examples (small sets only: the before/after check)."""
        if len(rows) > 64:
            return None
        was = model.training
        model.eval()
        with torch.no_grad():
            vals = [float(model(**collate([r])).loss) for r in rows]
        model.train(was)
        return sum(vals) / len(vals)

    loss_before = mean_loss()
    trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collate, callbacks=[Losses()])
    result = trainer.train()
    loss_after = mean_loss()
    t_train = time.monotonic() - t0
    changed = None
    if before is not None:
        params = dict(model.named_parameters())
        diff = sum(int((params[n].detach() != w).sum()) for n, w in before.items())
        changed = diff / max(1, sum(w.numel() for w in before.values()))
    ckpt = outdir / "checkpoint"
    written = save_checkpoint(model, tok, recipe, ckpt, names)
    manifest = {"trained_by": TRAINED_BY, "checkpoint": "checkpoint", "digest": weights_digest(ckpt),
                "recipe": {k: v for k, v in recipe.items()}, "dataset": dataset, "examples": len(rows),
                "tokens_per_epoch": sum(len(r["input_ids"]) for r in rows),
                "target_tokens_per_epoch": sum(sum(1 for x in r["labels"] if x != -100) for r in rows),
                "steps": int(result.global_step), "losses": losses, "loss_before": loss_before,
                "loss_after": loss_after, "trainable": len(names),
                "trainable_changed_fraction": changed, "memory_estimate": fits,
                "train_seconds": round(t_train, 1), "seconds": round(time.monotonic() - t0, 1), **written}
    tmp = outdir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, outdir / MANIFEST)
    return manifest


def save_checkpoint(model: Any, tok: Any, recipe: dict[str, Any], ckpt: Path, names: list[str]) -> dict[str, Any]:
    """Write the trained model: a GGUF base gives ``checkpoint/model.gguf`` (the base file with
    the trained tensors in F32, for the embedded llama.cpp runtime); any other base gives
    ``save_pretrained`` folders (model in bf16 when ``bf16``, and tokenizer)."""
    import torch

    if recipe.get("method") == "lora":
        names = sorted({n.split(".lora_")[0].replace("base_model.model.", "", 1) + ".weight"
                        for n in names if ".lora_A." in n})
        model = model.merge_and_unload()
    ckpt.mkdir(parents=True, exist_ok=True)
    base = str(recipe.get("base_model", ""))
    if base.endswith(".gguf") and recipe.get("init") != "random":
        from memtrials.studies.history.calibrator.sft_gguf import export_gguf

        state = {n: p.detach().float().cpu().numpy() for n, p in model.named_parameters() if n in set(names)}
        tensors = export_gguf(base, str(ckpt / GGUF_FILE), state, names, model.config)
        return {"gguf": f"checkpoint/{GGUF_FILE}", "gguf_sha256": file_sha256(ckpt / GGUF_FILE),
                "gguf_tensors_trained": len(tensors)}
    if recipe.get("bf16"):
        model = model.to(torch.bfloat16)
    model.save_pretrained(str(ckpt))
    tok.save_pretrained(str(ckpt))
    return {}


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fine-tune the calibrator (section 6.1) on the label dataset.")
    ap.add_argument("--recipe", required=True, help="JSON file: the calibrator.train recipe")
    ap.add_argument("--dataset", required=True, help="chat-format JSONL from the calibrator_dataset rule")
    ap.add_argument("--out", required=True, help="output folder (checkpoint/ and memtrials-sft.json)")
    a = ap.parse_args(argv)
    # before torch loads OpenMP: threads that spin while waiting slow training many-fold on
    # shared cores (measured: 16 steps took 690 s at load 10 with the default policy)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    with open(a.recipe, encoding="utf-8") as fh:
        recipe = json.load(fh)
    m = train(recipe, a.dataset, a.out)
    print(json.dumps({"examples": m["examples"], "first_loss": m["losses"][0]["loss"] if m["losses"] else None,
                      "last_loss": m["losses"][-1]["loss"] if m["losses"] else None, "digest": m["digest"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
