"""A trained checkpoint back to GGUF for the embedded llama.cpp runtime (training environment:
numpy, torch, ``gguf``).  The base GGUF (the shipped SmolLM2 Q4_1 file) is copied key by key
and tensor by tensor; every tensor the fine-tune changed is written in F32 from the trained
weights (Hugging Face names mapped to llama.cpp's, the q/k rows put back in llama.cpp's
rotary order), every other tensor keeps its original bytes and quantization.  So the served
model is exactly the base the fine-tune started from (transformers dequantizes the same
bytes) plus the trained update.  Llama-architecture GGUF files only (SmolLM2's).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

BLOCK = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight"}


def gguf_name(hf: str) -> str:
    """llama.cpp's tensor name of a Hugging Face llama parameter name."""
    if hf in TOP:
        return TOP[hf]
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)", hf)
    if not m or m.group(2) not in BLOCK:
        raise ValueError(f"no GGUF name for parameter {hf!r} (llama architecture only)")
    return f"blk.{m.group(1)}.{BLOCK[m.group(2)]}.{m.group(3)}"


def to_llama_cpp_rows(w: Any, heads: int) -> Any:
    """Reorder q/k projection rows from Hugging Face's rotary layout (two halves per head) to
    llama.cpp's (interleaved pairs), the inverse of what transformers undoes on loading."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def export_gguf(base: str, out: str, weights: Mapping[str, Any], changed: Iterable[str], config: Any) -> list[str]:
    """Write ``out``: ``base`` with the tensors of the ``changed`` parameters replaced by
    ``weights[name]`` (numpy, F32).  Returns the GGUF names written anew."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(base)
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise ValueError(f"{base}: GGUF architecture {arch!r}; the export handles llama only")
    new: dict[str, Any] = {}
    for hf in changed:
        w = np.asarray(weights[hf], dtype=np.float32)
        if hf.endswith("self_attn.q_proj.weight"):
            w = to_llama_cpp_rows(w, int(config.num_attention_heads))
        elif hf.endswith("self_attn.k_proj.weight"):
            w = to_llama_cpp_rows(w, int(config.num_key_value_heads))
        name = gguf_name(hf)
        if name == "output.weight" and name not in {t.name for t in reader.tensors}:
            continue  # tied to the embeddings (SmolLM2): token_embd carries it
        new[name] = np.ascontiguousarray(w)
    writer = gguf.GGUFWriter(out, arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)
    for t in reader.tensors:
        if t.name in new:
            writer.add_tensor(t.name, new[t.name])
        else:
            writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    missing = sorted(set(new) - {t.name for t in reader.tensors})
    if missing:
        raise ValueError(f"{base}: the trained tensors {missing[:5]} are not in the base GGUF")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sorted(new)
