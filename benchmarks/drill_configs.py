"""Reliability drill: malformed configs are rejected before any model call, precisely.

Each variant is a broken ``--configfile`` overlay, ``models.yaml`` or preset (unknown keys,
wrong types, missing required keys, bad endpoint names, unknown roles, a key pasted into
``api_key_env``, duplicate YAML keys, a folder as ``models_file``, an empty overlay, a YAML
syntax error, more tasks than a split holds, unknown environment options, ...).  Each is
run, in a workflow copy in a temporary folder, through the entry points a user hits:

- ``python -m memtrials config check --configfile base.yaml VARIANT`` (``check``),
- ``snakemake -n --configfile base.yaml VARIANT`` (``dryrun``), and
- ``bin/run -n --configfile base.yaml VARIANT`` (``binrun``, the README's entry point: it reads
  the overlays with the project's loader before Snakemake's own loader can reject them
  without naming them; run in the copy with ``bin/setup`` replaced by a no-op and ``.venv``
  linked, so the set-up is not re-run),

where ``base.yaml`` points every endpoint at the loopback server of this drill.  A run is
*rejected precisely* when it exits non-zero, the loopback server received no request, and
the output names the file, the key, and a fix (``Fix:`` or an instruction), without a
Python traceback and without echoing a pasted key.  Variants of the whole study level
(tasks per cell or per role, splits, environment options) go through all three entries:
``config check`` builds every study's workflow helper, as the rule files do.

    python benchmarks/drill_configs.py [--quick] [--keep]

``--quick`` runs ``config check`` only (seconds a variant; the test does this); the full
drill runs ``snakemake -n`` and ``bin/run -n`` too, for every variant (a few seconds each).  More tasks than a split holds is tried on ALFWorld's generated games, whose
split sizes are known before any job; for official data the size is known once
``results/tasks/<env>.parquet`` exists (before that the cell itself refuses, before its
first call: see ``memtrials.envs.catalog``); the variant lists every
ALFWorld task type (the known size is the whole split's) and turns the calibrator off (its
own check of ``calibrator.sources.envs`` against ``history.envs`` would answer first).
The last line is the figure: variants, runs, rejected precisely, imprecise (rejected before
any request but without naming the file, the key or a fix), missed (accepted, a request
made, a traceback, or the pasted key echoed).
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

import yaml

from drill_common import PY, REPO, env, loopback_overlay, snakemake_args, workflow_copy, workflow_drill_arguments

from memtrials.testing import LoopbackServer

FIX = re.compile(r"\bFix\b|\bset \S|\badd \S|\bremove\b|\buse \S|\brename\b|\bname an?\b|\bcorrect\b|"
                 r"\bdrop\b|\bput\b|\bkeep one\b|\bchoose\b|\bone of\b|\ballowed\b", re.IGNORECASE)
PASTED = "sk-proj-" + secrets.token_hex(20)          # a key pasted where a variable's name belongs
PASTED_UPPER = "AKIA" + secrets.token_hex(8).upper()  # upper case: looks like a name to a naive check


@dataclass
class Variant:
    name: str
    files: dict[str, str]                 # relative path -> text (the variant's own file first)
    key: str                              # the key the message must name
    entries: tuple[str, ...] = ("check", "dryrun", "binrun")
    config: str | None = None             # replaces config/config.yaml for `config check --config`
    secret: str | None = None             # must never be printed
    file: str = field(default="")         # the file the message must name (default: the first of files)

    def __post_init__(self) -> None:
        self.file = self.file or next(iter(self.files))


def _models(**change) -> str:
    entry = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "max_concurrency": 2,
             "params": {"temperature": 0.0, "max_tokens": 16}, "structured_output": True,
             "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}}
    entry.update(change)
    return yaml.safe_dump({"endpoints": {"loop": {k: v for k, v in entry.items() if v is not None}}})


def variants(full_config: str) -> list[Variant]:
    with_models = "models_file: {}\n"
    no_cache = yaml.safe_load(full_config)
    no_cache.pop("cache")
    preset = (REPO / "config/presets/luck-paper.yaml").read_text()
    one = "".join(f"    {line}\n" for line in yaml.safe_dump(yaml.safe_load(_models())["endpoints"]["loop"]).splitlines())
    return [
        Variant("unknown top-level key", {"bad.yaml": "panle: [loop]\n"}, "panle"),
        Variant("unknown nested key", {"bad.yaml": "luck:\n  sed: 3\n"}, "sed"),
        Variant("wrong type (string for an integer)", {"bad.yaml": "history:\n  tasks_per_cell: three\n"},
                "tasks_per_cell"),
        Variant("wrong type (mapping for a list)", {"bad.yaml": "panel: {loop: 1}\n"}, "panel"),
        Variant("invalid enum value", {"bad.yaml": "cache:\n  mode: sometimes\n"}, "mode"),
        Variant("missing required key in the config", {"full.yaml": yaml.safe_dump(no_cache)}, "cache",
                entries=("check",), config="full.yaml"),
        Variant("unknown endpoint in panel", {"bad.yaml": "panel: [gpt-5-typo]\n"}, "panel"),
        Variant("unknown endpoint for a role", {"bad.yaml": "roles:\n  judge: nope-model\n"}, "judge"),
        Variant("unknown role", {"bad.yaml": "roles:\n  critic: loop\n"}, "critic"),
        Variant("pasted key in api_key_env", {"bad.yaml": with_models.format("m1.yaml"),
                                              "m1.yaml": _models(api_key_env=PASTED)},
                "api_key_env", secret=PASTED, file="m1.yaml"),
        Variant("pasted upper-case key in api_key_env", {"bad.yaml": with_models.format("m2.yaml"),
                                                         "m2.yaml": _models(api_key_env=PASTED_UPPER)},
                "api_key_env", secret=PASTED_UPPER, file="m2.yaml"),
        Variant("duplicate endpoint names in models.yaml",
                {"bad.yaml": with_models.format("m3.yaml"), "m3.yaml": f"endpoints:\n  loop:\n{one}  loop:\n{one}"},
                "loop", file="m3.yaml"),
        Variant("duplicate key in an overlay", {"bad.yaml": "panel: [loop]\nsmoke:\n  enabled: false\n"
                                                            "panel: [loop]\n"}, "panel"),
        Variant("models_file is a folder", {"bad.yaml": "models_file: config\n"}, "models_file",
                file="config"),
        Variant("models_file does not exist", {"bad.yaml": "models_file: no-such-models.yaml\n"}, "models_file",
                file="no-such-models.yaml"),
        Variant("models entry without base_url", {"bad.yaml": with_models.format("m4.yaml"),
                                                  "m4.yaml": _models(base_url=None)}, "base_url", file="m4.yaml"),
        Variant("models entry with a wrong type", {"bad.yaml": with_models.format("m5.yaml"),
                                                   "m5.yaml": _models(max_concurrency="many")},
                "max_concurrency", file="m5.yaml"),
        Variant("empty overlay", {"empty.yaml": ""}, "--configfile"),
        Variant("YAML syntax error in an overlay", {"bad.yaml": "history:\n  envs: [scienceworld\n  seed: 3\n"},
                "line"),
        Variant("YAML syntax error in models.yaml", {"bad.yaml": with_models.format("m6.yaml"),
                                                     "m6.yaml": "endpoints:\n  loop: {provider: openai\n"},
                "line", file="m6.yaml"),
        Variant("overlay that is a list", {"bad.yaml": "- panel\n- loop\n"}, "mapping"),
        Variant("missing prompts folder", {"bad.yaml": "luck:\n  prompts_dir: config/prompts/no-such\n"},
                "prompts_dir"),
        Variant("unknown environment in history.envs", {"bad.yaml": "history:\n  envs: [minecraft]\n"}, "envs"),
        Variant("preset with an unknown key", {"preset.yaml": preset + "\nluck_typo: {seed: 1}\n"}, "luck_typo"),
        Variant("tasks per cell larger than the split",
                {"bad.yaml": "history:\n  envs: [alfworld]\n  tasks_per_cell: 100000\n  task_types: {alfworld: null}\n"
                             "calibrator:\n  enabled: false\n"},
                "tasks_per_cell"),
        Variant("unknown history.splits entry",
                {"bad.yaml": "history:\n  envs: [scienceworld]\n  splits: {scienceworld: tset}\n"},
                "splits"),
        Variant("unknown history.env_options key",
                {"bad.yaml": "history:\n  envs: [scienceworld]\n  env_options: {scienceworld: {colour: red}}\n"},
                "colour"),
        Variant("playbook training tasks larger than the split",
                {"bad.yaml": "playbook:\n  growth:\n    train_tasks: 100000\n"}, "playbook.growth.train_tasks"),
        Variant("unknown split of an antipersist pool",
                {"bad.yaml": "antipersist:\n  pools:\n    alfworld: {train_split: train, train_tasks: 4, "
                             "eval_split: evl, eval_tasks: 1}\n"}, "antipersist.pools.alfworld.eval_split"),
        Variant("unknown playbook.env_options key",
                {"bad.yaml": "playbook:\n  env_options: {alfworld: {colour: red}}\n"}, "colour"),
        Variant("unknown calibrator split",
                {"bad.yaml": "calibrator:\n  splits: {alfworld: trn, scienceworld: train, appworld: train}\n"},
                "calibrator.splits.alfworld"),
        Variant("interval level outside (0, 1)", {"bad.yaml": "playbook:\n  measurement:\n    level: 1.5\n"},
                "playbook.measurement.level"),
        Variant("a token cap of 0", {"bad.yaml": "antipersist:\n  synthesis:\n    max_tokens: 0\n"},
                "antipersist.synthesis.max_tokens"),
        Variant("cache.path under a file", {"bad.yaml": "cache:\n  path: config/models.yaml/llm.sqlite\n"}, "cache.path"),
        Variant("negative seed in models.yaml", {"bad.yaml": with_models.format("m7.yaml"),
                                                 "m7.yaml": _models(params={"temperature": 0.0, "max_tokens": 16,
                                                                            "seed": -1})},
                "seed", file="m7.yaml"),
    ]


def judge(v: Variant, out: str, rc: int, requests: int) -> tuple[bool, list[str]]:
    """Rejected precisely?  Returns (rejected before any request, what is missing for
    precision).  A miss is a run accepted, a request made, a traceback or an
    echoed key; imprecise is a rejection that does not name the file, the key or a fix."""
    gaps = []
    if rc == 0:
        return False, ["accepted"]
    if requests:
        return False, [f"{requests} request(s) reached the endpoint"]
    if v.file not in out:
        gaps.append(f"does not name the file {v.file}")
    if v.key not in out:
        gaps.append(f"does not name the key {v.key}")
    if not FIX.search(out):
        gaps.append("names no fix")
    hard = []
    if "Traceback (most recent call last)" in out:
        hard.append("a Python traceback")
    if v.secret and v.secret in out:
        hard.append("echoes the pasted key")
    return (False, hard + gaps) if hard else (True, gaps)


def main(argv: list[str] | None = None) -> int:
    args = workflow_drill_arguments(__doc__, argv, quick="config check only (no snakemake -n)")
    t0 = time.monotonic()
    wf = workflow_copy(prefix="memtrials-drill-configs-")
    (wf / "bin").mkdir()  # bin/run as it is; its set-up replaced by a no-op, the checkout's .venv linked
    shutil.copy2(REPO / "bin" / "run", wf / "bin" / "run")
    (wf / "bin" / "setup").write_text("#!/bin/sh\nexit 0\n")
    (wf / "bin" / "setup").chmod(0o755)
    (wf / ".venv").symlink_to(REPO / ".venv")
    runs = precise = imprecise = missed = ran = 0
    by_entry: dict[str, list[int]] = {"check": [0, 0], "dryrun": [0, 0], "binrun": [0, 0]}
    problems: list[str] = []
    with LoopbackServer() as srv:
        loopback_overlay(srv, wf, "base.yaml", api_key_env=None)
        full_config = (wf / "config/config.yaml").read_text()
        vs = variants(full_config)
        for v in vs:
            for rel, text in v.files.items():
                (wf / rel).write_text(text)
            first = next(iter(v.files))
            entries = tuple(e for e in v.entries if e == "check") if args.quick else v.entries
            if not entries:
                continue
            ran += 1
            for entry in entries:
                if entry == "check":
                    cmd = [PY, "-m", "memtrials", "config", "check"]
                    cmd += ["--config", v.config] if v.config else ["--configfile", "base.yaml", first]
                elif entry == "dryrun":
                    cmd = snakemake_args("-n", "--configfile", "base.yaml", first, cores=1)
                else:
                    cmd = ["bin/run", "-n", "--configfile", "base.yaml", first]
                before = srv.stats.requests
                p = subprocess.run(cmd, cwd=wf, capture_output=True, text=True, timeout=600, env=env())
                out = p.stdout + p.stderr
                rejected, gaps = judge(v, out, p.returncode, srv.stats.requests - before)
                runs += 1
                by_entry[entry][0] += 1
                if not rejected:
                    missed += 1
                elif not gaps:
                    precise += 1
                    by_entry[entry][1] += 1
                else:
                    imprecise += 1
                status = "precise" if rejected and not gaps else ("MISSED" if not rejected else "imprecise")
                print(f"[{status:9}] {entry:6} {v.name}" + (f": {'; '.join(gaps)}" if gaps else ""), flush=True)
                if gaps:
                    msg = [ln for ln in out.splitlines() if v.key in ln or "error" in ln.lower()][:3]
                    problems.append(f"{entry} / {v.name}: {'; '.join(gaps)} | " + " / ".join(m[:300] for m in msg))
            for rel in v.files:
                if (wf / rel).is_file():
                    (wf / rel).unlink()
    if problems:
        print("\nnot rejected precisely:")
        for line in problems:
            print("  " + line)
    if not args.keep:
        shutil.rmtree(wf.parent, ignore_errors=True)
    print(f"\nchecks: config check {by_entry['check'][1]}/{by_entry['check'][0]} precise, "
          f"snakemake -n {by_entry['dryrun'][1]}/{by_entry['dryrun'][0]} precise, "
          f"bin/run -n {by_entry['binrun'][1]}/{by_entry['binrun'][0]} precise; {time.monotonic() - t0:.0f} s")
    print(f"configs: variants={ran} runs={runs} rejected_precisely={precise} imprecise={imprecise} "
          f"missed={missed}")
    return 0 if precise == runs else 1


if __name__ == "__main__":
    sys.exit(main())
