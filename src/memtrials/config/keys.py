"""API keys pasted where the name of an environment variable belongs: detection and the message.

A rejected ``api_key_env`` is never printed (it may be a pasted key, and messages end up
in ``.snakemake/log/``), and a value shaped like a key (:func:`key_shape`) is rejected even
when it would pass as a variable name.  :func:`secrets_in` lists the values a message must
not show.
"""

from __future__ import annotations

from typing import Any, Mapping

_KEY_PREFIXES = {  # lower-cased prefix -> whose key it looks like
    "sk-or-": "an OpenRouter key", "sk-ant-": "an Anthropic key", "sk-proj-": "an OpenAI project key",
    "sk-": "an OpenAI-style secret key", "sk_": "a secret key", "hf_": "a Hugging Face token",
    "gsk_": "a Groq key", "aiza": "a Google API key", "xai-": "an xAI key", "pplx-": "a Perplexity key",
    "r8_": "a Replicate token", "ghp_": "a GitHub token", "github_pat_": "a GitHub token",
    "glpat-": "a GitLab token", "nvapi-": "an NVIDIA key", "akia": "an AWS access key", "fw_": "a Fireworks key",
}


def key_shape(value: str) -> str | None:
    """Why ``value`` looks like a secret rather than a variable name (``None``: it does not).

    Known prefixes (case-insensitive; followed by a long token where a name could start so), any ``_``-separated part of
    16 or more characters, a part of 10 or more with 3 or more digits, a part that flips
    between letters and digits 4 or more times, or a value over 64 characters.  A variable
    name is words: OPENAI_API_KEY, AZURE_OPENAI_API_KEY, HF_TOKEN pass.
    """
    low = value.lower()
    for prefix, whose in _KEY_PREFIXES.items():
        rest = value[len(prefix):]
        # a name cannot hold '-', so a dash prefix needs little after it; others a long token
        longest = max(len(part) for part in rest.replace("-", "_").split("_"))
        if low.startswith(prefix) and (longest >= 3 if prefix.endswith("-") else longest >= 12):
            return f"it starts like {whose}"
    if len(value) > 64:
        return "it is longer than any variable name"
    for part in value.replace("-", "_").split("_"):
        digits = sum(c.isdigit() for c in part)
        flips = sum(a.isdigit() != b.isdigit() for a, b in zip(part, part[1:]))
        if len(part) >= 16:
            return "it holds a long random-looking token"
        if len(part) >= 10 and digits >= 3 or len(part) >= 8 and flips >= 4:
            return "it mixes letters and digits like a token"
    return None


def api_key_env_message(where: str, value: Any) -> str:
    """The message for a rejected ``api_key_env`` at key ``where``, without its value."""
    shape = key_shape(value) if isinstance(value, str) else None
    what = (f"looks like an API key itself ({shape}), not the name of a variable" if shape
            else "is not the NAME of an environment variable (upper-case letters, digits and _)")
    fix = ("Fix: put the NAME of an environment variable there (e.g. api_key_env: OPENAI_API_KEY) and export "
           "the key in it before running (export OPENAI_API_KEY=<the key>; keep the key out of every file).")
    if shape:
        fix += " If this file was shared or committed, revoke that key."
    return f"key {where}: the value {what}; it is not shown here so that it stays out of logs. {fix}"


def secrets_in(data: Any) -> list[str]:
    """Every string under a key ``api_key_env`` in ``data`` (never printed in a message)."""
    found: list[str] = []
    if isinstance(data, Mapping):
        for k, v in data.items():
            if k == "api_key_env" and isinstance(v, str) and v:
                found.append(v)
            else:
                found.extend(secrets_in(v))
    elif isinstance(data, list):
        for v in data:
            found.extend(secrets_in(v))
    return found
