"""Re-verify the authored AppWorld task set and remake its verification manifest
(:mod:`memtrials.envs.appworld.manifest`, ``src/memtrials/envs/appworld/verification.json``)::

    .venv/bin/python -m memtrials.envs.appworld.verify --all --write

``--workers N`` processes; without ``--all`` only tasks the manifest does not cover are
verified; without ``--write`` nothing is written and the command fails when the manifest is
stale.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from memtrials.envs.appworld.manifest import MANIFEST, load_manifest, write_manifest


def main(argv: list[str] | None = None) -> int:
    """Build the task set in a temporary root, verify (changed tasks, or ``--all``), and
    compare with (``--write``: rewrite) the manifest."""
    from memtrials.envs.appworld.data import build_root

    p = argparse.ArgumentParser(prog="python -m memtrials.envs.appworld.verify", description=__doc__.split("\n\n")[0])
    p.add_argument("--all", action="store_true", help="verify every task, not only those the manifest does not cover")
    p.add_argument("--write", action="store_true", help="rewrite the manifest with the results")
    p.add_argument("--workers", type=int, default=2, help="verification processes (default 2)")
    p.add_argument("--seed", type=int, default=0, help="the task set's seed (envs.seed; default 0)")
    p.add_argument("--manifest", default=str(MANIFEST), help="manifest path")
    args = p.parse_args(argv)
    manifest = None if args.all or not Path(args.manifest).exists() else load_manifest(args.manifest)
    with tempfile.TemporaryDirectory(prefix="appworld-verify-") as tmp:
        res = build_root(Path(tmp) / "root", seed=args.seed, workers=args.workers, verified=manifest)
    rows, stale = res.rows, res.verified
    print(f"appworld: {len(rows)} tasks, {len(stale)} verified by AppWorld's evaluator now "
          f"({'all' if args.all else 'not covered by the manifest'}), all passed", flush=True)
    if args.write:
        write_manifest(args.manifest, args.seed, res.world_digest, res.entries)
        print(f"wrote {args.manifest}")
        return 0
    if manifest is None or stale:
        print(f"error: {args.manifest} does not cover {len(stale) if manifest else len(rows)} task(s); "
              f"rerun with --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
