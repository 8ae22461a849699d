"""Entry points of the luck study's Snakemake rules (one function per rule; the scripts
in ``workflow/scripts/luck_*.py`` only pass ``snakemake.input/params/output``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.io import atomic_write_text, write_parquet

# Heavier modules (analysis, tables, figure, the model client) are imported inside the
# functions that need them: each rule runs in a fresh process.

log = logging.getLogger("memtrials.luck")


def make_worlds(*, seed: int, domains: int, per_domain: int, margin: float, out: str) -> pd.DataFrame:
    from memtrials.studies.luck.worlds import generate_worlds, worlds_frame

    df = worlds_frame(generate_worlds(int(seed), int(domains), int(per_domain), float(margin)))
    write_parquet(df, out)
    log.info("%d worlds (%d domains x %d) from seed %s -> %s", len(df), domains, per_domain, seed, out)
    return df


def load_worlds(path: str):
    from memtrials.studies.luck.worlds import worlds_from_frame

    return worlds_from_frame(pd.read_parquet(path), source=path)


def _current_manifest(worlds_path: str, prompts_dir: str, config_slice: Mapping[str, Any]) -> dict[str, Any]:
    from memtrials.studies.luck.freeze import build_manifest
    from memtrials.studies.luck.prompts import PromptSet

    return build_manifest(worlds_path, load_worlds(worlds_path), PromptSet.load(prompts_dir), config_slice)


def freeze(*, worlds: str, prompts_dir: str, config_slice: Mapping[str, Any], registered: str,
           out: str) -> dict[str, Any]:
    """Register the freeze (first run) or verify it; write the verified manifest."""
    from memtrials.studies.luck.freeze import register_or_verify

    current = _current_manifest(worlds, prompts_dir, config_slice)
    manifest = register_or_verify(current, registered)
    shown = {k: v for k, v in manifest.items() if k != "lock"}
    atomic_write_text(out, json.dumps(shown, indent=1, sort_keys=True))
    log.info("freeze verified: %s (registered %s)", manifest["registered"]["digest"][:16],
             manifest["registered"]["at"])
    return manifest


def verify_freeze(*, worlds: str, prompts_dir: str, config_slice: Mapping[str, Any], registered: str) -> None:
    """Refuse to run a writer, reader or analysis cell when the protocol drifted."""
    from memtrials.studies.luck.freeze import register_or_verify

    register_or_verify(_current_manifest(worlds, prompts_dir, config_slice), registered,
                       allow_register=False)


async def writers(*, config: Mapping[str, Any], model: str, worlds: str, prompts_dir: str,
                  config_slice: Mapping[str, Any], registered: str, max_tokens: int | None,
                  out: str, calls: str) -> pd.DataFrame:
    from memtrials.llm import open_client
    from memtrials.studies.luck.prompts import PromptSet
    from memtrials.studies.luck.writers import LESSON_SCHEMA, write_lessons

    verify_freeze(worlds=worlds, prompts_dir=prompts_dir, config_slice=config_slice, registered=registered)
    world_list, prompts = load_worlds(worlds), PromptSet.load(prompts_dir)
    async with open_client(config, f"luck/{model}/writers", calls) as client:
        df = await write_lessons(client, model, world_list, prompts, max_tokens)
    write_parquet(df, out, LESSON_SCHEMA)
    missing = df[df.status != "ok"]
    log.info("%s: %d lessons, %d missing (%s)", model, len(df), len(missing),
             dict(missing.status.value_counts()) if len(missing) else "none")
    return df


async def readers(*, config: Mapping[str, Any], model: str, worlds: str, lessons: str,
                  prompts_dir: str, config_slice: Mapping[str, Any], registered: str,
                  max_tokens: int | None, out: str, calls: str) -> pd.DataFrame:
    from memtrials.llm import open_client
    from memtrials.studies.luck.prompts import PromptSet
    from memtrials.studies.luck.readers import ANSWER_SCHEMA, read_answers
    from memtrials.studies.luck.writers import check_lessons

    verify_freeze(worlds=worlds, prompts_dir=prompts_dir, config_slice=config_slice, registered=registered)
    world_list, prompts = load_worlds(worlds), PromptSet.load(prompts_dir)
    lesson_table = pd.read_parquet(lessons)
    check_lessons(lesson_table, lessons)
    async with open_client(config, f"luck/{model}/readers", calls) as client:
        df = await read_answers(client, model, world_list, prompts, lesson_table, max_tokens)
    write_parquet(df, out, ANSWER_SCHEMA)
    log.info("%s: %s", model, dict(df.status.value_counts()))
    return df


def _read_checked(paths: Sequence[str], check: Any) -> list[pd.DataFrame]:
    out = []
    for p in paths:
        df = pd.read_parquet(p)
        check(df, p)
        out.append(df)
    return out


def lock_records(*, worlds: pd.DataFrame, answers: Sequence[str], lessons: Sequence[str],
                 config_slice: Mapping[str, Any], registered: str,
                 registered_run: bool = True) -> dict[str, Any] | None:
    """Lock the records into the registered manifest once complete (else verify the lock);
    before the first lock, check that every call sent the registered parameters.
    Returns the lock, or None while the records are incomplete."""
    from memtrials.llm.records import read_records
    from memtrials.studies.luck.lock import check_sent, incomplete, lock_or_verify, records_of

    ids = list(worlds.world_id)
    gaps = []
    for kind, paths in (("lessons", lessons), ("answers", answers)):
        for p in paths:
            gaps += [f"{p}: {g}" for g in incomplete(pd.read_parquet(p), kind, ids)]
    if gaps:
        log.warning("records incomplete, not locked: %s", "; ".join(gaps[:5]))
        return None
    files = records_of(answers, lessons)
    endpoints = config_slice["endpoints"]
    for f in files:
        if f.endswith(".calls.parquet"):
            model = Path(f).parent.name
            role = "writer" if Path(f).name.startswith("lessons") else "reader"
            if model in endpoints:
                check_sent(read_records(f).to_pandas(), f, endpoints[model], role, registered_run)
    lock = lock_or_verify(registered, [str(p) for p in files])
    log.info("records locked at %s (%d files)", lock["at"], len(lock["records"]))
    return lock


def endpoint_table(config_slice: Mapping[str, Any]) -> pd.DataFrame:
    """Table 6's content: each panel endpoint's model id, base URL and provider pin, and the
    parameters each role sent (from the frozen config slice)."""
    rows = []
    for name in config_slice["panel"]:
        e = config_slice["endpoints"][name]
        ident = e.get("identity") or {}
        pin = (e.get("extra_body") or {}).get("provider")
        rows.append({"unit": name, "model": ident.get("model"),
                     "base_url": ident.get("base_url") or ("embedded " + str(ident.get("embedded", ""))[:12]),
                     "provider_pin": json.dumps(pin, sort_keys=True) if pin else "",
                     "writer_params": json.dumps(e["sent"]["writer"]["params"], sort_keys=True),
                     "reader_params": json.dumps(e["sent"]["reader"]["params"], sort_keys=True),
                     "structured_output": bool(e.get("structured_output"))})
    return pd.DataFrame(rows)


def analysis(*, worlds: str, answers: Sequence[str], lessons: Sequence[str], prompts_dir: str,
             config_slice: Mapping[str, Any], registered: str, rules: Mapping[str, Any],
             outdir: str) -> None:
    from memtrials.studies.luck.analysis import TABLES, analyse
    from memtrials.studies.luck.examples import appendix_c, examples_markdown, select_examples
    from memtrials.studies.luck.inference import Rules
    from memtrials.studies.luck.readers import check_answers
    from memtrials.studies.luck.writers import check_lessons

    verify_freeze(worlds=worlds, prompts_dir=prompts_dir, config_slice=config_slice, registered=registered)
    world_table = pd.read_parquet(worlds)
    lock = lock_records(worlds=world_table, answers=answers, lessons=lessons, config_slice=config_slice,
                        registered=registered, registered_run=Rules.from_config(dict(rules)).registered)
    answer_table = pd.concat(_read_checked(answers, check_answers), ignore_index=True)
    lesson_parts = _read_checked(lessons, check_lessons)
    lesson_table = pd.concat(lesson_parts, ignore_index=True) if lesson_parts else None
    a = analyse(answer_table, world_table, Rules.from_config(dict(rules)), lesson_table)
    a.lock = lock
    a.endpoints = endpoint_table(config_slice)
    out = Path(outdir)
    if lesson_table is not None:
        chosen = appendix_c(answer_table, lesson_table, world_table, a.quantities, a.readings, a.remedies,
                            a.lessons)
        atomic_write_text(out / "examples.md",
                          examples_markdown(select_examples(answer_table, lesson_table, world_table), chosen))
    for name in TABLES:
        write_parquet(getattr(a, name), out / f"{name}.parquet")
    atomic_write_text(out / "registered.json", a.to_json())
    if not a.rules.registered:
        log.warning("analysis on NOT registered thresholds: %s", a.rules.caption_note())
    for r in a.readings.itertuples():
        log.info("%s %s: %s", r.unit, r.contrast, r.label)


def report(*, analysis_dir: str, tables_dir: str, figures: Sequence[str]) -> None:
    from memtrials.studies.luck.figure import write_figure1
    from memtrials.studies.luck.inference import Rules
    from memtrials.studies.luck.tables import build_tables, write_all

    d = Path(analysis_dir)
    rules = Rules.from_config(json.loads((d / "registered.json").read_text(encoding="utf-8"))["rules"])
    tables = {n: pd.read_parquet(d / f"{n}.parquet") for n in
              ("quantities", "readings", "remedies", "cell_rates", "lessons", "missingness", "endpoints",
               "coverage", "anomalies", "regret", "bootstrap")}
    write_all(build_tables(**tables, margin=rules.margin), tables_dir, note=rules.caption_note())
    write_figure1(tables["quantities"], list(figures), rules.margin)
