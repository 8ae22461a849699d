"""The luck study's freeze: a SHA-256 manifest of everything that determines the
registered run (*Lessons from Luck*, section 3.5, "Freeze, deposit and timestamp").

The manifest holds the SHA-256 of the worlds table (file and content), of every prompt
file, of every rendered request (all writer requests; every reader request with the
memory item left as a placeholder, rendered as each panel endpoint receives it: with the
answer schema appended to the prompt where the endpoint has no structured output), of
the study's config slice (the ``luck`` section, the resolved panel, and per endpoint its
identity, provider pin, declared parameters and the parameters each role sends) and of
every source file that determines an output (:mod:`.codeset`: the study, the statistics
and report code it imports, the model layer that builds requests).

The first freeze registers the manifest (``registered.json``); from then on the freeze
rule, the writer and reader cells and the analysis refuse to run when the current
manifest differs from the registered one, listing what changed.  Once the records are
complete the analysis locks their digests into ``registered.json`` (:mod:`.lock`).  To
re-freeze on purpose (a new registered run)::

    python -m memtrials.studies.luck.freeze --refreeze [results/luck/freeze/registered.json]

which moves the registered manifest aside (kept as ``registered.<UTC time>.json``); the
next run registers the new one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import hashlib
import inspect
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from memtrials.io import atomic_write_text, canonical_json
from memtrials.llm.structured import json_instruction
from memtrials.studies.luck.codeset import PARTS, REPO, protocol_files
from memtrials.studies.luck.design import DECISIONS, INSTRUCTIONS, OUTCOMES
from memtrials.studies.luck.prompts import PromptSet, answer_schema
from memtrials.studies.luck.worlds import World

REGISTERED = "results/luck/freeze/registered.json"
MEMORY_PLACEHOLDER = "<memory item>"
# keys of registered.json that are not the manifest's content
META = ("registered", "lock")
REFREEZE = "python -m memtrials.studies.luck.freeze --refreeze"


class FreezeMismatch(RuntimeError):
    """The current protocol (or a locked run's records) differs from the registered freeze."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    return sha256_bytes(Path(path).read_bytes())


canonical: Callable[[Any], str] = functools.partial(canonical_json, indent=None, newline=False, default=str)
"""What every freeze digest hashes: the canonical JSON, one compact line, no newline, other
types written with ``str``."""


def code_files(part: str = "freeze") -> list[str]:
    """Source files (repository-relative) that determine ``part``'s outputs.  The study is
    frozen as one unit, so every part depends on the whole protocol code."""
    if part not in PARTS:
        raise ValueError(f"unknown luck workflow part {part!r}; expected one of {PARTS}")
    return list(protocol_files())


CODE_FILES = tuple(code_files())


def sent_params(endpoint: Any, max_tokens: int | None) -> dict[str, Any]:
    """The sampling parameters a writer or reader request sends to ``endpoint``: the
    entry's ``params`` with the study's ``max_tokens`` override (None keeps the entry's),
    the provider pin, and how a reader's schema travels.  The seed, where the entry sets
    one, is offset by each request's sample index (the model layer's rule)."""
    params = dict(endpoint.params)
    if max_tokens is not None:
        params["max_tokens"] = int(max_tokens)
    return {"params": params, "extra_body": dict(endpoint.extra_body),
            "seed": "entry seed + sample index" if params.get("seed") is not None else "none",
            "reader_schema": "response_format json_schema" if endpoint.structured_output
            else "appended to the prompt"}


def _reader_frame(prompts: PromptSet, w: World, d: str, o: str, memory: str, structured: bool) -> Any:
    msgs = prompts.reader_messages(w, d, o, memory)
    if not structured:  # what the model layer sends to an endpoint without structured output
        msgs = [*msgs[:-1], {**msgs[-1], "content": msgs[-1]["content"] + json_instruction(answer_schema(w))}]
    return msgs


def rendered_digest(worlds: list[World], prompts: PromptSet,
                    structured_modes: Iterable[bool] = (True,)) -> dict[str, Any]:
    """Digests over every rendered writer request and reader frame, in a fixed order; the
    reader frames once per structured-output mode present in the panel."""
    h = hashlib.sha256()
    n = 0
    for w in worlds:
        for i in INSTRUCTIONS:
            for d in DECISIONS:
                for o in OUTCOMES:
                    h.update(canonical(prompts.writer_messages(w, i, d, o)).encode())
                    n += 1
    out: dict[str, Any] = {"writer": {"sha256": h.hexdigest(), "requests": n}}
    for structured in sorted(set(structured_modes), reverse=True):
        h, n = hashlib.sha256(), 0
        for w in worlds:
            for d in DECISIONS:
                for o in OUTCOMES:
                    for memory in (MEMORY_PLACEHOLDER, prompts.neutral_memory(w), prompts.planted_memory(w)):
                        h.update(canonical(_reader_frame(prompts, w, d, o, memory, structured)).encode())
                        n += 1
        key = "reader" if structured else "reader[schema in prompt]"
        out[key] = {"sha256": h.hexdigest(), "requests": n}
    return out


def _structured_modes(config_slice: Mapping[str, Any]) -> list[bool]:
    eps = config_slice.get("endpoints") or {}
    return sorted({bool(e.get("structured_output", True)) for e in eps.values()} or {True})


def build_manifest(worlds_path: str | os.PathLike[str], worlds: list[World], prompts: PromptSet,
                   config_slice: Mapping[str, Any], code: Iterable[str] = CODE_FILES) -> dict[str, Any]:
    table = [w.__dict__ for w in worlds]
    return {
        "study": "luck",
        "worlds": {"path": str(worlds_path), "count": len(worlds),
                   "file_sha256": sha256_file(worlds_path),
                   "content_sha256": sha256_bytes(canonical(table).encode())},
        "prompt_files": prompts.digests(),
        "rendered_prompts": rendered_digest(worlds, prompts, _structured_modes(config_slice)),
        "config": {"slice": json.loads(canonical(config_slice)),
                   "sha256": sha256_bytes(canonical(config_slice).encode())},
        "code": {f: sha256_file(REPO / f) for f in code},
    }


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    """Digest of the manifest's content (its registration metadata and lock excluded)."""
    return sha256_bytes(canonical({k: v for k, v in manifest.items() if k not in META}).encode())


def differences(registered: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable list of what differs between two manifests."""
    out = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for k in sorted(set(a) | set(b)):
                if k in META and not path:
                    continue
                if k not in a:
                    out.append(f"{path}{k}: new")
                elif k not in b:
                    out.append(f"{path}{k}: removed")
                else:
                    walk(a[k], b[k], f"{path}{k}.")
        elif a != b:
            out.append(f"{path.rstrip('.')}: {str(a)[:60]} -> {str(b)[:60]}")

    walk(registered, current, "")
    return out


def read_registered(registered_path: str | os.PathLike[str]) -> dict[str, Any]:
    reg = Path(registered_path)
    try:
        return json.loads(reg.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FreezeMismatch(f"{reg}: not valid JSON ({exc}); restore it or re-freeze "
                             f"({REFREEZE} {reg})") from None


def write_registered(manifest: Mapping[str, Any], registered_path: str | os.PathLike[str]) -> None:
    atomic_write_text(registered_path, json.dumps(manifest, indent=1, sort_keys=True))


def register_or_verify(current: dict[str, Any], registered_path: str | os.PathLike[str],
                       allow_register: bool = True) -> dict[str, Any]:
    """Register ``current`` if nothing is registered yet, else check it matches.

    Returns the registered manifest.  Raises :class:`FreezeMismatch` naming every
    difference and the re-freeze command.
    """
    reg = Path(registered_path)
    if not reg.exists():
        if not allow_register:
            raise FreezeMismatch(
                f"{reg}: no registered freeze; run the luck_freeze rule first "
                "(snakemake --cores 1 results/luck/freeze/manifest.json)")
        manifest = dict(current)
        manifest["registered"] = {
            "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "digest": manifest_digest(current),
        }
        write_registered(manifest, reg)
        return manifest
    registered = read_registered(reg)
    diff = differences(registered, current)
    if diff:
        shown = "\n  ".join(diff[:20]) + (f"\n  ... and {len(diff) - 20} more" if len(diff) > 20 else "")
        raise FreezeMismatch(
            f"the luck study no longer matches its registered freeze ({reg}, registered "
            f"{registered.get('registered', {}).get('at', '?')}); differences:\n  {shown}\n"
            f"A registered run cannot drift silently. Undo the change, or re-freeze on purpose:\n"
            f"  {REFREEZE} {reg}"
        )
    return registered


def refusing(main: Callable[[], Any]) -> Callable[[], Any]:
    """Wrap a rule's main (sync, or returning a coroutine) so that a freeze mismatch stops
    the job with its message (exit 1) instead of a traceback."""
    def stop(exc: FreezeMismatch) -> None:
        logging.getLogger("memtrials.luck").error("%s", exc)
        sys.exit(1)

    def wrapped() -> Any:
        try:
            result = main()
        except FreezeMismatch as exc:
            stop(exc)
        if not inspect.iscoroutine(result):
            return result

        async def awaited() -> Any:
            try:
                return await result
            except FreezeMismatch as exc:
                stop(exc)
        return awaited()
    return wrapped


def refreeze(registered_path: str | os.PathLike[str] = REGISTERED) -> Path | None:
    """Move the registered manifest aside so that the next run registers a new one."""
    reg = Path(registered_path)
    if not reg.exists():
        return None
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    dest = reg.with_name(f"{reg.stem}.{stamp}{reg.suffix}")
    os.replace(reg, dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memtrials.studies.luck.freeze", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--refreeze", action="store_true", help="move the registered manifest aside")
    ap.add_argument("registered", nargs="?", default=REGISTERED)
    args = ap.parse_args(argv)
    if not args.refreeze:
        ap.print_help()
        return 2
    dest = refreeze(args.registered)
    if dest is None:
        print(f"{args.registered}: nothing registered; the next run registers the freeze")
    else:
        print(f"moved {args.registered} -> {dest}; the next run (snakemake) registers a new freeze")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
