"""Command line: ``python -m memtrials <command>``.

    config check [--configfile F ...]   validate config/config.yaml + overlays, the registry and
                              the prompt folders, and run every study's checks before any job
                              (as ``snakemake -n`` does), with messages naming file, line and key
                              (Snakemake's own loader reports an empty or unparsable
                              --configfile without naming it: run this to find out which)
    models check [NAME ...]   check endpoints: key variable, /v1/models, 1-token completion
    models list               list the registry
    spend                     paid calls, tokens and USD per endpoint (from the cache ledger; prompt tokens
                              a provider served from its prefix cache at price.cached_input_per_mtok)
    estimate [--configfile F ...] [--records DIR [--derive FILE]]
                              jobs, episodes, calls, tokens, prefix-cacheable share, USD and wall
                              time per study and endpoint of a run, before any call
    cache compact             merge the finished shards of a ``cache.backend: shards`` cache (beside cache.path) into one
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from memtrials.config import ConfigError, Sources, check_config, load_config, load_models, load_overlay
from memtrials.config.prompts import check_prompts


def _models(args: argparse.Namespace) -> int:
    models = load_models(args.models)
    if args.action == "list":
        for name, ep in models.items():
            where = ep.base_url or (f"planted:{ep.planted.policy}" if ep.planted else
                                    f"embedded:{ep.embedded.distribution if ep.embedded else ''}")
            print(f"{name:<24} {ep.provider:<9} {ep.model:<40} {where}")
        return 0
    from memtrials.llm.check import check_endpoint

    unknown = [n for n in args.names if n not in models]
    if unknown:
        print(f"error: {args.models}: no endpoint named {', '.join(unknown)} (known: {', '.join(models)})",
              file=sys.stderr)
        return 2
    failed = 0
    for name in args.names or list(models):
        result = check_endpoint(models[name], timeout=args.timeout)
        print(result.line(), flush=True)
        failed += not result.ok
    return 1 if failed else 0


def check_studies(config: dict, files: list[str], names: list[str] | None = None) -> dict[str, Any]:
    """Build every registered study (:data:`memtrials.studies.STUDIES`) from ``config``, as
    the rule files do when Snakemake parses the workflow, so that their checks before any job
    (sizes, splits, environment options, roles: each study's ``check``) run here too; a
    failure is a :class:`ConfigError` naming the file that set its key."""
    from memtrials.studies import study_classes

    sources = Sources((f, load_overlay(f)) for f in files)
    models = check_config(config, sources)

    built = {}
    for study in study_classes():
        if names and study.name not in names:
            continue
        try:
            built[study.name] = study(config, models, lambda name: models[name].cell_params())
        except (ConfigError, ValueError) as exc:
            raise ConfigError(sources.explain(exc)) from None
    return built


def _config(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.configfile)
    check_prompts(config, " + ".join([args.config, *args.configfile]))
    check_studies(config, [args.config, *args.configfile])
    print(f"ok: {args.config}" + "".join(f" + {f}" for f in args.configfile))
    return 0


def _spend(args: argparse.Namespace) -> int:
    from memtrials.llm.cache.backends import open_cache

    config = load_config(args.config, args.configfile)
    path = Path(config["cache"]["path"])
    backends = [config["cache"]["backend"]]
    other = {"sqlite": path.is_file(), "shards": (path.parent / "shards").is_dir()}
    backends += [b for b, present in other.items() if present and b not in backends]  # a cluster run's too
    for backend in backends:
        cache = open_cache(path, backend=backend)
        if len(backends) > 1:
            print(f"cache.backend {backend}:")
        print(f"{'endpoint':<24} {'calls':>8} {'prompt tok':>12} {'compl. tok':>12} {'USD':>10}")
        for endpoint, calls, pt, ct, usd in cache.totals():
            print(f"{endpoint:<24} {calls:>8} {pt:>12} {ct:>12} {usd:>10.4f}")
        _reported(cache)
        cache.close()
    return 0


def _reported(cache: Any) -> None:
    """The cost the endpoints reported themselves, where they did (the USD above is the
    registry's prices): a body's ``usage.cost``, else a router's ``x-litellm-response-cost``."""
    from memtrials.llm.router import reported_spend

    rows = reported_spend(cache.records())
    if rows:
        print("reported by the endpoints (body usage.cost, else the router's x-litellm-response-cost):")
        for endpoint, calls, usd in rows:
            print(f"{endpoint:<24} {calls:>8} {'':>12} {'':>12} {usd:>10.4f}")


def _estimate(args: argparse.Namespace) -> int:
    from memtrials.pipeline import estimate as est

    files = [args.config, *args.configfile]
    config = load_config(args.config, args.configfile)
    check_prompts(config, " + ".join(files))
    from memtrials.studies import study_names

    unknown = sorted(set(args.studies or []) - set(study_names()))
    if unknown:
        raise ConfigError(f"estimate --studies: unknown {', '.join(unknown)}; registered: {', '.join(study_names())}")
    studies = check_studies(config, files, args.studies)
    models = load_models(config["models_file"])
    if args.records:
        profiles = est.derive_profiles(est.read_journals(args.records), studies, models)
        import datetime

        measured = {"records": str(args.records), "config": files, "studies": sorted(studies),
                    "date": datetime.date.today().isoformat(),
                    "endpoints": sorted({w.endpoint for s in studies.values() for w in s.workload()})}
        if args.derive and args.add:
            added = est.add_profiles(args.derive, profiles, {**measured, "run": args.add})
            print(f"added to {args.derive}: {len(added)} profiles from {args.records} it lacked: {', '.join(added)}")
        elif args.derive:
            est.write_profiles(args.derive, profiles, measured)
            print(f"wrote {args.derive}: {len(profiles)} profiles from {args.records}")
        where = f"measured from the records in {args.records}"
    else:
        path = args.profiles or config["estimate"]["profiles"]
        try:
            profiles, measured = est.load_profiles(path)
        except (FileNotFoundError, ValueError) as exc:
            raise ConfigError(f"config key estimate.profiles: {exc}") from None
        where = f"measured figures from {path}" + (f" ({measured.get('note')})" if measured.get("note") else "")
    hosted = float(config["estimate"]["hosted_latency_s"])
    rows = est.estimate(studies, models, profiles, hosted)
    print(f"estimate of {' + '.join(files)}: counts from each study's design, per-call tokens {where}; "
          f"calls at the design's step caps x the measured share; wall time at each endpoint's max_concurrency "
          f"(rpm/tpm where set), {hosted:g} s a call on a served endpoint, the measured latency on an embedded one")
    print(est.render(rows, models))
    return 0


def _cache(args: argparse.Namespace) -> int:
    from memtrials.llm.cache.backends import open_cache

    config = load_config(args.config, args.configfile)
    shards = Path(config["cache"]["path"]).parent / "shards"
    if not shards.is_dir():
        print(f"error: no {shards}/: only a cache written with cache.backend: shards (the cluster profiles) "
              f"has shards to compact. Fix: pass the config the run used (--config, --configfile) so that "
              f"cache.path points at its cache.", file=sys.stderr)
        return 2
    cache = open_cache(config["cache"]["path"], backend="shards")
    try:
        counts = cache.compact()
    finally:
        cache.close()
    print("compacted: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


def _config_command(sub: Any, name: str, help_text: str, func: Callable[[argparse.Namespace], int]) -> None:
    """Command ``name`` (``sub``: its parent's subparsers) run by ``func``, with ``--config`` and
    its ``--configfile`` overlays, as every config-reading command takes them."""
    parser = sub.add_parser(name, help=help_text)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--configfile", nargs="*", default=[], help="overlays, in the order Snakemake merges them")
    parser.set_defaults(func=func)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memtrials")
    sub = parser.add_subparsers(dest="command", required=True)
    models = sub.add_parser("models", help="inspect and check the model registry")
    msub = models.add_subparsers(dest="action", required=True)
    for action, help_text in (("check", "key variable, /v1/models and a 1-token completion per endpoint"),
                              ("list", "list the registry")):
        p = msub.add_parser(action, help=help_text)
        p.add_argument("names", nargs="*", help="endpoint names (default: all)")
        p.add_argument("--models", default="config/models.yaml", help="registry file")
        p.add_argument("--timeout", type=float, default=30.0)
        p.set_defaults(func=_models)
    cfg = sub.add_parser("config", help="validate the config, its overlays, the registry and the prompt folders")
    _config_command(cfg.add_subparsers(dest="action", required=True), "check",
                    "what the workflow checks before any job (the studies' checks included)", _config)
    _config_command(sub, "spend", "what was paid so far, per endpoint", _spend)
    _config_command(sub, "estimate", "calls, tokens, USD and wall time of a run, before any call", _estimate)
    est = sub.choices["estimate"]
    est.add_argument("--profiles", default=None, help="measured per-call figures (default: estimate.profiles)")
    est.add_argument("--records", default=None,
                     help="derive the figures from a finished run's call journals instead (results/records), "
                          "run with this same config")
    est.add_argument("--studies", nargs="*", default=None,
                     help="only these studies (built and checked alone; default: every registered one)")
    est.add_argument("--derive", default=None, help="with --records: write the derived figures to this file")
    est.add_argument("--add", default=None, metavar="RUN",
                     help="with --derive: add to that table only the purposes it lacks, its entries kept, and note "
                          "RUN (which run, commit, machine) with the config and date under measured.additions")
    cache = sub.add_parser("cache", help="maintain the response cache")
    _config_command(cache.add_subparsers(dest="action", required=True), "compact",
                    "merge a shards cache's finished shards into one file", _cache)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:  # every command: a config error is one line naming file and key, status 2
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
