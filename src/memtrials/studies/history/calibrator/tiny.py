"""A tiny, randomly initialised model of the calibrator's architecture family (Qwen3), built
locally for the CPU test of the SFT recipe: a byte-level BPE tokenizer trained on the
dataset's own texts (no download) with a ChatML-style chat template, and a recipe that
asks :mod:`sft` for ``init: random`` with a Qwen3 config of tiny sizes.  Like ``sft.py``,
run with the training environment's interpreter::

    .venv-train/bin/python src/memtrials/studies/history/calibrator/tiny.py --dataset D.jsonl --out DIR \\
        --recipe-from recipe.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TINY_QWEN3 = {"model_type": "qwen3", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 4096,
              "tie_word_embeddings": True}


def build_tokenizer(texts: list[str], out: Path, vocab_size: int = 512) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return fast


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build a tiny Qwen3-family recipe for the SFT CPU test.")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--recipe-from", required=True, help="JSON recipe whose training settings are kept")
    a = ap.parse_args(argv)
    out = Path(a.out)
    texts = []
    with open(a.dataset, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                texts += [m["content"] for m in row["prompt"]] + [row["target"]]
    tok = build_tokenizer(texts, out / "tokenizer")
    recipe = json.loads(Path(a.recipe_from).read_text(encoding="utf-8"))
    recipe.update(init="random", tokenizer=str(out / "tokenizer"),
                  model_config={**TINY_QWEN3, "vocab_size": len(tok), "eos_token_id": tok.eos_token_id,
                                "pad_token_id": tok.pad_token_id})
    (out / "recipe.json").write_text(json.dumps(recipe, indent=1), encoding="utf-8")
    print(str(out / "recipe.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
