"""The model side of the SFT recipe (:mod:`.sft`), in the training environment (standard
library, torch, transformers, peft, gguf): loading the base model in fp32 (a Hugging Face id,
a local folder, or a GGUF file such as the embedded SmolLM2's, which transformers
dequantizes), choosing what trains (every weight, the top ``train_layers`` blocks, or LoRA
adapters on them), the memory estimate printed before training and the two refusals (an
estimate above the device's memory; the CPU for a model above ``cpu_max_params`` unless
``allow_cpu``).

Master weights are always fp32: ``bf16`` only turns on autocast on a GPU (the Trainer's
mixed precision), so an update of lr 1e-5 is never rounded away in a bf16 weight.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# the config keys the refusals name (the recipe is calibrator.train less the rule's plumbing)
KEY = "calibrator.train"


class RecipeRefused(ValueError):
    """The recipe asks for something this device cannot or may not do (names the key)."""


def gguf_eos(path: str) -> int | None:
    """The end-of-sequence token id a GGUF file declares (llama.cpp stops on it)."""
    import gguf

    field = gguf.GGUFReader(path).fields.get("tokenizer.ggml.eos_token_id")
    return int(field.contents()) if field is not None else None


def load_model(recipe: dict[str, Any]) -> tuple[Any, Any]:
    """The base model in fp32 and its tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if recipe.get("init") == "random":
        tok = AutoTokenizer.from_pretrained(recipe["tokenizer"])
        cfg = AutoConfig.for_model(**recipe["model_config"])
        torch.manual_seed(int(recipe["seed"]))
        return AutoModelForCausalLM.from_config(cfg).float(), tok
    base = str(recipe["base_model"])
    if base.endswith(".gguf"):
        folder, name = str(Path(base).parent), Path(base).name
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        eos = gguf_eos(base)
        if eos is not None:  # transformers' GGUF tokenizer may name another eos than llama.cpp stops on
            tok.eos_token = tok.convert_ids_to_tokens(eos)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        return model, tok
    tok = AutoTokenizer.from_pretrained(recipe.get("tokenizer") or base)
    return AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), tok


def block_index(name: str) -> int | None:
    m = re.search(r"\.layers\.(\d+)\.", name)
    return int(m.group(1)) if m else None


def top_layers(model: Any, recipe: dict[str, Any]) -> list[int] | None:
    """The transformer blocks that train (``train_layers``: the top N; None: all)."""
    n = recipe.get("train_layers")
    if n is None:
        return None
    total = int(model.config.num_hidden_layers)
    if not 1 <= int(n) <= total:
        raise RecipeRefused(f"config key {KEY}.train_layers: {n}, the model has {total} blocks; give 1..{total} or null")
    return list(range(total - int(n), total))


def select_trainable(model: Any, recipe: dict[str, Any]) -> Any:
    """Freeze what does not train; for ``method: lora`` wrap the model with peft adapters on
    ``lora.target_modules`` of the chosen blocks.  Returns the model to train."""
    layers = top_layers(model, recipe)
    method = recipe.get("method", "full")
    if method == "lora":
        from peft import LoraConfig, get_peft_model

        lo = recipe["lora"]
        cfg = LoraConfig(r=int(lo["r"]), lora_alpha=int(lo["alpha"]), lora_dropout=float(lo["dropout"]),
                         target_modules=list(lo["target_modules"]), layers_to_transform=layers,
                         bias="none", task_type="CAUSAL_LM")
        return get_peft_model(model, cfg)
    if method != "full":
        raise RecipeRefused(f"config key {KEY}.method: {method!r}; allowed: full, lora")
    for name, p in model.named_parameters():
        p.requires_grad = layers is None or block_index(name) in layers
    return model


def trainable_names(model: Any) -> list[str]:
    return [n for n, p in model.named_parameters() if p.requires_grad]


def memory_estimate(model: Any, recipe: dict[str, Any]) -> dict[str, int]:
    """Bytes needed to train: fp32 parameters, gradients and AdamW's two fp32 moments of the
    trainable ones, and activations at ``max_length`` x ``batch_size`` (with gradient
    checkpointing: one hidden state per block plus one block's internals and the logits;
    without: every block's internals)."""
    cfg = model.config
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    tokens = int(recipe["max_length"]) * int(recipe["batch_size"])
    hidden, layers = int(cfg.hidden_size), int(cfg.num_hidden_layers)
    inter = int(getattr(cfg, "intermediate_size", 4 * hidden))
    heads = int(cfg.num_attention_heads)
    act_bytes = 2 if recipe.get("bf16") else 4
    # one block's saved tensors: norms, q/k/v/o, attention probabilities (eager upper bound), MLP
    per_block = tokens * (8 * hidden + 3 * inter) * act_bytes + int(recipe["batch_size"]) * heads * int(
        recipe["max_length"]) ** 2 * act_bytes
    blocks = layers * tokens * hidden * act_bytes + per_block if recipe.get("gradient_checkpointing") \
        else layers * per_block
    logits = 2 * tokens * int(cfg.vocab_size) * 4
    est = {"parameters": 4 * total, "gradients": 4 * trainable, "optimizer_state": 8 * trainable,
           "activations": blocks + logits}
    est["total"] = sum(est.values())
    est["n_parameters"], est["n_trainable"] = total, trainable
    return est


def device_memory() -> tuple[str, int]:
    """The device training runs on and its memory in bytes (a GPU's total; the CPU's available RAM)."""
    import psutil
    import torch

    if torch.cuda.is_available():
        return f"cuda:{torch.cuda.get_device_name(0)}", int(torch.cuda.get_device_properties(0).total_memory)
    return "cpu", int(psutil.virtual_memory().available)


def check_fits(model: Any, recipe: dict[str, Any], log: Any = print) -> dict[str, Any]:
    """Print the estimate; refuse a model whose estimate exceeds the device's memory, and the
    CPU for a model above ``cpu_max_params`` unless ``allow_cpu`` is true."""
    est = memory_estimate(model, recipe)
    device, have = device_memory()
    gib = 1024 ** 3
    log("memory estimate (GiB): " + ", ".join(f"{k} {est[k] / gib:.2f}" for k in
                                               ("parameters", "gradients", "optimizer_state", "activations", "total"))
        + f"; {est['n_trainable']:,} of {est['n_parameters']:,} parameters train; "
        f"max_length {recipe['max_length']} x batch {recipe['batch_size']}; device {device} with {have / gib:.1f} GiB")
    if est["total"] > have:
        raise RecipeRefused(f"the training memory estimate {est['total'] / gib:.1f} GiB exceeds {device}'s "
                            f"{have / gib:.1f} GiB: lower {KEY}.max_length or batch_size, set "
                            f"{KEY}.gradient_checkpointing: true, use {KEY}.method: lora, or train on a larger device")
    if device == "cpu" and est["n_parameters"] > int(recipe["cpu_max_params"]) and not recipe.get("allow_cpu"):
        raise RecipeRefused(f"no GPU, and the model has {est['n_parameters']:,} parameters, above "
                            f"{KEY}.cpu_max_params ({int(recipe['cpu_max_params']):,}): run on a GPU node, or set "
                            f"{KEY}.allow_cpu: true to train on the CPU anyway")
    return {**est, "device": device, "device_memory": have}
