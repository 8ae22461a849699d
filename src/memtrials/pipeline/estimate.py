"""A run's cost before any call: each study's workload (:class:`memtrials.pipeline.workload.Work`)
times measured per-call figures (:class:`memtrials.pipeline.workload.Profile`), summed per
study and endpoint, priced by the registry (:meth:`memtrials.config.models.Price.cost`) and
timed at each endpoint's concurrency and rate limits.

The figures come from a finished run's call records (``results/records/*.jsonl``): for
each ``<study>/<part>/<purpose>`` the recorded calls over the design's calls at the step
cap, a prompt-token line over the step of the episode (steps found by prefix chains: a
call whose prompt extends an earlier call's prompt is that call's next step), the mean
completion tokens, and the share of prompt tokens that repeat an earlier prompt's prefix.
:func:`derive_profiles` computes them; ``config/estimate/profiles.yaml`` ships those of
the default run on the embedded model.  A purpose no run measured takes its figures from
its study's design where the study gives them (:func:`with_design`,
:meth:`memtrials.pipeline.study.Study.design_figures`), marked as such in the printed
table.  This module names no study.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from memtrials.pipeline.workload import ANY, Profile, Tally, Work

CHAIN_SHARE = 0.5
"""A call continues an earlier call's episode when their prompts share at least this share of the earlier prompt."""
LOOK_BACK = 256
"""Earlier calls of the same cell a call's prompt is compared with (prefix chains and shares)."""


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (binary search on slices)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def prompt_text(messages: Any) -> str:
    """The request's text in order (role and content of each message), as a provider's prefix cache sees it."""
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except ValueError:
            return messages
    if not isinstance(messages, list):
        return "" if messages is None else str(messages)
    return "".join(f"<{m.get('role', '')}>{m.get('content', '')}" if isinstance(m, Mapping) else str(m)
                   for m in messages)


def read_journals(folder: str | Path) -> list[dict[str, Any]]:
    """Every call record of a run's journals (``<folder>/*.jsonl``), once per call id."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    r = json.loads(line)
                    seen[(str(r.get("cell_id")), str(r.get("call_id")))] = r
    return list(seen.values())


def chains(records: Sequence[Mapping[str, Any]]) -> list[tuple[int, float]]:
    """Per record of one cell (in call order): its step in its prefix chain (1: a fresh
    episode) and the share of its prompt that repeats an earlier prompt's prefix."""
    texts = [prompt_text(r.get("messages")) for r in records]
    out: list[tuple[int, float]] = []
    for i, text in enumerate(texts):
        best, parent = 0, -1
        for j in range(max(0, i - LOOK_BACK), i):
            n = common_prefix(text, texts[j])
            if n > best:
                best, parent = n, j
        chained = parent >= 0 and best >= CHAIN_SHARE * len(texts[parent]) and len(texts[parent]) > 0 \
            and records[parent].get("purpose") == records[i].get("purpose")
        step = out[parent][0] + 1 if chained else 1
        out.append((step, best / len(text) if text else 0.0))
    return out


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares intercept and slope of y over x (slope 0 with one x), the intercept at x = 1."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx > 0 else 0.0
    return my + slope * (1 - mx), slope


def expand(name: str, rows: Sequence[Work], profiles: Mapping[str, Profile]) -> list[tuple[str, str, Work]]:
    """``(key, endpoint, row)`` per counted purpose of study ``name``'s workload ``rows``: a
    :data:`ANY` row once per measured purpose of its part that no other row of the part names
    (a chat purpose on the row's endpoint, an embedding one on its ``embedder``)."""
    named = {(w.part, w.purpose) for w in rows if w.purpose and w.purpose != ANY}
    out: list[tuple[str, str, Work]] = []
    for w in rows:
        prefix = f"{w.profile or f'{name}/{w.part}'}/"
        if w.purpose != ANY:
            out.append((prefix + w.purpose, w.endpoint, w))
            continue
        out.append((prefix, w.endpoint, replace(w, purpose="")))  # its jobs and episodes
        found = 0
        for key, p in sorted(profiles.items()):
            purpose = key[len(prefix):]
            if key.startswith(prefix) and "/" not in purpose and (w.part, purpose) not in named:
                ep = w.embedder if p.task == "embed" and w.embedder else w.endpoint
                out.append((key, ep, replace(w, purpose=purpose, jobs=0, episodes=0)))
                found += 1
        if not found:  # nothing measured: flagged (no call counted), not silently nothing
            out.append((prefix + ANY, w.endpoint, replace(w, jobs=0, episodes=0)))
    return out


def derive_profiles(records: Iterable[Mapping[str, Any]], studies: Mapping[str, Any],
                    models: Mapping[str, Any] | None = None, cells: set[str] | None = None) -> dict[str, Profile]:
    """Per-call figures per ``<study>/<part>/<purpose>`` from the call records of a run made
    with the config that built ``studies`` (name -> :class:`memtrials.pipeline.study.Study`):
    the design's calls at the cap are read from the same studies' :meth:`workload`.  With
    ``cells`` (the ids of the cells that finished), only their records and the workload rows
    of those cells (and rows that name no cell) count."""
    by_cell: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    planted = {n for n, e in (models or {}).items() if getattr(e, "planted", None) is not None}
    for r in records:  # a known-answer run's planted agent is no measurement of a real endpoint
        if (cells is None or str(r.get("cell_id")) in cells) and str(r.get("endpoint")) not in planted:
            by_cell[str(r.get("cell_id"))].append(r)
    points: dict[str, list[tuple[int, Mapping[str, Any], float]]] = defaultdict(list)
    for cell, rows in by_cell.items():
        study = studies.get(cell.split("/", 1)[0])
        if study is None:
            continue
        rows = sorted(rows, key=lambda r: (str(r.get("started_at") or ""), str(r.get("call_id"))))
        for r, (step, share) in zip(rows, chains(rows)):
            part, purpose = study.profile_key(cell, str(r.get("purpose") or ""))
            points[f"{study.name}/{part}/{purpose}"].append((step, r, share))
    capped: dict[str, int] = defaultdict(int)
    measured = {k: Profile(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0) for k in points}
    for name, study in studies.items():
        rows = [w for w in (study.workload() if study.enabled else []) if cells is None or not w.cell or w.cell in cells]
        for key, _, w in expand(name, rows, measured):
            if w.purpose:
                capped[key] += w.capped_calls()
    tasks = {n: getattr(e, "task", "chat") for n, e in (models or {}).items()}
    out: dict[str, Profile] = {}
    for key, pts in sorted(points.items()):
        tokens = [(float(s), float(r.get("prompt_tokens") or 0)) for s, r, _ in pts]
        base, slope = _line(tokens)
        total = sum(t for _, t in tokens) or 1.0
        n = len(pts)
        steps = [s for s, _, _ in pts]
        out[key] = Profile(
            calls_per_unit=n / capped[key] if capped.get(key) else 1.0,
            prompt_base=max(base, 0.0), prompt_per_step=slope,
            completion=sum(float(r.get("completion_tokens") or 0) for _, r, _ in pts) / n,
            prefix_share=sum(sh * float(r.get("prompt_tokens") or 0) for _, r, sh in pts) / total,
            latency_s=sum(float(r.get("latency_s") or 0) for _, r, _ in pts) / n, calls=n,
            mean_step=(sum(steps) / n) if n else 1.0,
            task="embed" if any(tasks.get(str(r.get("endpoint"))) == "embed" for _, r, _ in pts) else "chat")
    return out


def load_profiles(path: str | Path) -> tuple[dict[str, Profile], dict[str, Any]]:
    """The measured table (``profiles``) and what it was measured on (``measured``)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such measured table; fix: set estimate.profiles to "
                                "config/estimate/profiles.yaml, or write one with python -m memtrials estimate "
                                "--derive <file> --records results/records")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    profiles = {k: Profile.from_mapping(k, v, str(path)) for k, v in (data.get("profiles") or {}).items()}
    return profiles, dict(data.get("measured") or {})


def write_profiles(path: str | Path, profiles: Mapping[str, Profile], measured: Mapping[str, Any]) -> None:
    import yaml

    from memtrials.io import atomic_write_text

    text = ("# Measured per-call figures for `python -m memtrials estimate` (memtrials.pipeline.estimate):\n"
            "# written by `python -m memtrials estimate --derive`; docs/estimate.md says what each field is.\n"
            + yaml.safe_dump({"measured": dict(measured), "profiles": {k: p.as_dict() for k, p in profiles.items()}},
                             sort_keys=False, width=120))
    atomic_write_text(path, text)


def with_design(studies: Mapping[str, Any], profiles: Mapping[str, Profile]) -> dict[str, Profile]:
    """``profiles`` and, for each purpose they lack, the figures its enabled study derives from
    its design (``source: design``); a measured figure always wins over a design one."""
    out = dict(profiles)
    for study in studies.values():
        if study.enabled:
            for key, p in study.design_figures(profiles).items():
                if key not in out:
                    out[key] = replace(p, source="design")
    return out


def add_profiles(path: str | Path, profiles: Mapping[str, Profile], measured: Mapping[str, Any]) -> list[str]:
    """Add to the table at ``path`` the measured ``profiles`` it lacks (its own entries kept, a
    design figure replaced), noting ``measured`` (run, config, date) and the keys under its
    header's ``additions``; returns the added keys."""
    old, header = load_profiles(path)
    added = sorted(k for k, p in profiles.items() if p.source == "measured" and p.calls
                   and (k not in old or old[k].source == "design"))
    if added:
        header.setdefault("additions", []).append({**dict(measured), "profiles": added})
        write_profiles(path, {**old, **{k: profiles[k] for k in added}}, header)
    return added


def tally(work: Work, profile: Profile | None, seconds_per_call: float | None, key: str) -> Tally:
    """What one workload row adds: its calls (capped calls x ``calls_per_unit``), tokens (the
    profile's prompt line at the mean step the row's episodes reach), cacheable tokens, call
    seconds (``seconds_per_call``, or the profile's measured latency when None)."""
    t = Tally(jobs=work.jobs, episodes=work.episodes, parallel=work.jobs * work.in_flight)
    if not work.purpose:
        return t
    if profile is None:
        t.unmeasured.add(key)
        if work.purpose == ANY:
            return t
        profile = Profile(calls_per_unit=1.0, prompt_base=0.0, prompt_per_step=0.0, completion=0.0,
                          prefix_share=0.0, latency_s=0.0, calls=0)
    calls = work.capped_calls() * profile.calls_per_unit
    steps = max(1, int(work.steps))
    # the step a mean call is at: a row that repeats over steps, half its cap (scaled by the share of
    # the cap episodes took); a row made once per unit, the measured calls' own mean (its prompt: their mean)
    mean_step = profile.mean_step if steps == 1 else \
        1.0 + (steps - 1) / 2.0 * min(1.0, max(profile.calls_per_unit, 0.0))
    prompt = max(0.0, profile.prompt_base + profile.prompt_per_step * (mean_step - 1.0))
    t.calls = calls
    t.input_tokens = calls * prompt
    t.output_tokens = calls * profile.completion
    t.cacheable_tokens = t.input_tokens * profile.prefix_share
    t.call_seconds = calls * (profile.latency_s if seconds_per_call is None else seconds_per_call)
    if profile.source == "design":
        t.designed.add(key)
        t.design_tokens = t.input_tokens + t.output_tokens
    return t


def estimate(studies: Mapping[str, Any], models: Mapping[str, Any], profiles: Mapping[str, Profile],
             hosted_latency_s: float) -> dict[tuple[str, str], Tally]:
    """Per (study, endpoint): the sums of every row of every enabled study's workload (figures:
    ``profiles``, completed by the studies' design figures, :func:`with_design`)."""
    out: dict[tuple[str, str], Tally] = {}
    profiles = with_design(studies, profiles)
    for name, study in studies.items():
        if not study.enabled:
            continue
        for key, endpoint, w in expand(name, study.workload(), profiles):
            ep = models[endpoint]
            # an embedding request carries up to batch_size texts (a record, and a call here, per text)
            per = max(1, int(ep.batch_size)) if ep.task == "embed" else 1
            seconds = None if ep.provider == "embedded" else hosted_latency_s / per
            out.setdefault((name, endpoint), Tally()).add(tally(w, profiles.get(key), seconds, key))
    return out


def wall_seconds(t: Tally, endpoint: Any) -> float:
    """Seconds the calls take at the endpoint's concurrency (at most the jobs' episodes in
    flight), or at its ``rpm`` / ``tpm`` limits where those are slower."""
    parallel = max(1, min(int(endpoint.max_concurrency), t.parallel))
    bounds = [t.call_seconds / parallel]
    if endpoint.rpm:
        bounds.append(t.calls / float(endpoint.rpm) * 60.0)
    if endpoint.tpm:
        bounds.append((t.input_tokens + t.output_tokens) / float(endpoint.tpm) * 60.0)
    return max(bounds)


def dollars(t: Tally, endpoint: Any) -> tuple[float, float]:
    """USD at the registry's prices: every input token at the input price, and with the
    prefix-cacheable share at the cached-input price (the same figure where the registry gives none)."""
    price = endpoint.price
    return (price.cost(t.input_tokens, t.output_tokens),
            price.cost(t.input_tokens, t.output_tokens, t.cacheable_tokens))


def render(rows: Mapping[tuple[str, str], Tally], models: Mapping[str, Any]) -> str:
    """The table ``python -m memtrials estimate`` prints: one line per study and endpoint, then
    per endpoint (its wall time: every study's calls sharing its concurrency)."""
    head = (f"{'study':<12} {'endpoint':<22} {'jobs':>6} {'episodes':>9} {'calls':>10} {'input tok':>13} "
            f"{'output tok':>12} {'cacheable':>9} {'USD':>11} {'USD cached':>11} {'wall':>9} {'design':>6}")
    lines = [head, "-" * len(head)]
    per_ep: dict[str, Tally] = {}
    for (study, ep), t in sorted(rows.items()):
        per_ep.setdefault(ep, Tally()).add(t)
        lines.append(_row(study, ep, t, models[ep]))
    lines.append("-" * len(head))
    for ep, t in sorted(per_ep.items()):
        lines.append(_row("(all)", ep, t, models[ep]))
    designed = sorted(set().union(*(t.designed for t in rows.values()))) if rows else []
    if designed:
        lines.append(f"figures from the design, not measured (column design: their share of the tokens; "
                     f"docs/estimate.md, 'Figures from the design'), for {len(designed)} purpose(s): "
                     + ", ".join(designed))
    missing = sorted(set().union(*(t.unmeasured for t in rows.values()))) if rows else []
    if missing:
        lines.append(f"no measured figures for {len(missing)} purpose(s), counted as calls with 0 tokens: "
                     + ", ".join(missing))
    return "\n".join(lines)


def _row(study: str, ep: str, t: Tally, endpoint: Any) -> str:
    usd, usd_cached = dollars(t, endpoint)
    share = t.cacheable_tokens / t.input_tokens if t.input_tokens else 0.0
    return (f"{study:<12} {ep:<22} {t.jobs:>6} {t.episodes:>9} {t.calls:>10.0f} {t.input_tokens:>13,.0f} "
            f"{t.output_tokens:>12,.0f} {share:>8.0%} {usd:>11.2f} {usd_cached:>11.2f} "
            f"{_duration(wall_seconds(t, endpoint)):>9} {_share(t.design_tokens, t.input_tokens + t.output_tokens):>6}")


def _share(part: float, whole: float) -> str:
    if not whole:
        return "-"
    return "<1%" if 0 < part / whole < 0.005 else f"{part / whole:.0%}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
