"""Reliability drill: an API key never lands in a file the pipeline writes.

A dummy key (``sk-drill-<random>``) is put in the environment variable that the loopback
endpoint's registry entry names (``api_key_env: MEMTRIALS_DRILL_KEY``); a small Snakemake
target runs against that endpoint in a workflow copy in a temporary folder (the loopback
server checks that every request carried the key, so the key really was in play).  Then
every file under ``results/`` (the response cache and the call journals included),
``logs/`` and ``.snakemake/`` is scanned for the key: as raw bytes, as the decoded cells of
every Parquet file (whose pages may be compressed) and as the decoded cells of every
SQLite database (its WAL included, by reading it through SQLite).

    python benchmarks/drill_keys.py [--quick] [--keep]

``--quick`` runs the smoke check (one call); the full drill runs the Lessons-from-Luck
study at its default size as well.  The last line is the figure: files scanned, hits.
"""

from __future__ import annotations

import secrets
import shutil
import sqlite3
import sys
import time
from pathlib import Path

from drill_common import loopback_overlay, snakemake, workflow_copy, workflow_drill_arguments

from memtrials.testing import LoopbackServer

KEY_ENV = "MEMTRIALS_DRILL_KEY"
SCANNED = ("results", "logs", ".snakemake")
LUCK = ["results/luck/analysis/registered.json", "results/luck/tables/table1_panel.md"]


def parquet_cells(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    out = [str(table.schema.metadata or {})]
    for column in table.columns:
        out.extend(str(v) for v in column.to_pylist())
    return out


def sqlite_cells(path: Path) -> list[str]:
    out: list[str] = []
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            for row in db.execute(f'SELECT * FROM "{name}"'):
                out.extend(str(v) for v in row)
    return out


def scan(root: Path, key: str) -> tuple[int, list[str]]:
    """(files scanned, where the key was found)."""
    needle = key.encode()
    files, hits = 0, []
    for top in SCANNED:
        for path in sorted((root / top).rglob("*")) if (root / top).exists() else []:
            if not path.is_file() or path.is_symlink():
                continue
            files += 1
            data = path.read_bytes()
            if needle in data:
                hits.append(f"{path.relative_to(root)} (bytes)")
            if data[:4] == b"PAR1":
                if any(key in cell for cell in parquet_cells(path)):
                    hits.append(f"{path.relative_to(root)} (Parquet cells)")
            elif data[:16] == b"SQLite format 3\x00":
                if any(key in cell for cell in sqlite_cells(path)):
                    hits.append(f"{path.relative_to(root)} (SQLite rows)")
    return files, hits


def main(argv: list[str] | None = None) -> int:
    args = workflow_drill_arguments(__doc__, argv, quick="the smoke check only")
    t0 = time.monotonic()
    key = "sk-drill-" + secrets.token_hex(24)
    wf = workflow_copy(prefix="memtrials-drill-keys-")
    targets = ["results/smoke/loop.parquet"] + ([] if args.quick else LUCK)
    with LoopbackServer(keep_requests=True) as srv:
        loopback_overlay(srv, wf, api_key_env=KEY_ENV)
        out = snakemake(wf, "--configfile", "overlay.yaml", "--", *targets, extra_env={KEY_ENV: key})
        if out.returncode != 0:
            print((out.stdout + out.stderr)[-4000:])
            if not args.keep:
                shutil.rmtree(wf.parent, ignore_errors=True)
            print("keys: the run failed; nothing scanned")
            return 2
        posts = [h for p, h, _ in srv.received if p.endswith("/chat/completions")]
        carried = sum(h.get("authorization") == f"Bearer {key}" for h in posts)
    files, hits = scan(wf, key)
    # the run's own console output is what a user pastes into an issue: scan it too
    console_hits = int(key in out.stdout + out.stderr)
    for h in hits:
        print(f"  key found: {h}")
    if not args.keep:
        shutil.rmtree(wf.parent, ignore_errors=True)
    print(f"targets: {' '.join(targets)}; {len(posts)} model requests, {carried} carrying the key; "
          f"{time.monotonic() - t0:.0f} s")
    print(f"keys: files_scanned={files} hits={len(hits) + console_hits} requests_with_key={carried}/{len(posts)}")
    return 0 if not hits and not console_hits and posts and carried == len(posts) else 1


if __name__ == "__main__":
    sys.exit(main())
