# Shared set-up of the workflow: config validation, the run id, helpers (study(name):
# each registered study built once), and the list of final targets that the target rule
# "all" asks for. It lives in the root
# Snakefile because Snakemake takes the default target only from the main file.
import os
import re
import sys
from pathlib import Path

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from memtrials.config import ConfigError, check_config, config_sources  # noqa: E402
from memtrials.pipeline.scheduler import speed_up_scheduler  # noqa: E402
from memtrials.config.prompts import check_prompts  # noqa: E402
from memtrials.llm.runs import run_id  # noqa: E402
from memtrials.studies import study_class, study_names  # noqa: E402

# Two costs of Snakemake's scheduler that grow with the job count, removed (memtrials.pipeline.scheduler)
speed_up_scheduler()

# Validate the config and the model registry: first with messages that name the file
# that set the key (config.yaml, a --configfile overlay or --config), the key and the
# fix, then with snakemake.utils.validate against the same JSON schemas.
_settings = workflow.config_settings
try:
    # the files Snakemake merged, in its order, re-read by a loader that refuses duplicate keys
    CONFIG_SOURCES = config_sources(
        workflow.configfiles,
        _settings.configfiles,
        _settings.config,
        bool(getattr(_settings, "replace_workflow_config", False)),
    )
    MODELS = check_config(config, CONFIG_SOURCES)
    check_prompts(config, CONFIG_SOURCES)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None


def config_error(exc):
    """A study's ConfigError as a WorkflowError naming the file that set its key."""
    return WorkflowError(CONFIG_SOURCES.explain(exc))


validate(config, schema="../../config/schemas/config.schema.json")
with open(config["models_file"]) as _fh:
    validate(yaml.safe_load(_fh), schema="../../config/schemas/models.schema.json")

# One id for every job of this invocation (the per-run cost cap counts it).
run_id()

PANEL = list(config["panel"])

# Each study appends its final outputs here; the target rule "all" asks for them.
FINAL_TARGETS = []

# Known-answer runs (issue 38; workflow/rules/known_answer.smk): each study appends its planted
# tables ({"study": <name>, "stem": <path without extension>}) and the files that hold them.
KNOWN_ANSWER_TABLES = []
KNOWN_ANSWER_INPUTS = []

# `snakemake --report results/report.html`: the front page; each study marks its tables
# and figures with report(...) and a caption under workflow/report/ (its README).


report: "../report/workflow.rst"


wildcard_constraints:
    model="|".join(re.escape(m) for m in sorted(MODELS)),


def get_final_output(wildcards=None):
    return FINAL_TARGETS


BUILT_STUDIES = {}


def study(name):
    """Registered study ``name`` (``memtrials.studies.STUDIES``; a
    ``memtrials.pipeline.study.Study``) built from this run's config, once: its rules file
    and any other that reads it (calibrator.smk reads history's) get the same object.  A
    ``ConfigError`` of its checks stops the parse as a WorkflowError naming the file that
    set the key."""
    if name not in BUILT_STUDIES:
        try:
            BUILT_STUDIES[name] = study_class(name)(config, MODELS, get_endpoint_params)
        except ConfigError as exc:
            raise config_error(exc) from None
    return BUILT_STUDIES[name]


def enable_study(built):
    """Add a built study's final targets to ``all`` when it is enabled (the Snakefile calls
    it for every registered study once its rules file is included)."""
    if built.enabled:
        FINAL_TARGETS.extend(built.final_targets())


def get_report_items(paths, study, category):
    """Mark a study's figures (.png) and rendered tables (.html) among ``paths`` for the
    HTML report, each with its caption file ``workflow/report/<study>/<name>.rst``,
    grouped under ``category`` (the study) and Figures / Tables; other paths pass as
    they are.  Call it inside a rule's ``output:`` (workflow/report/README.md)."""

    def mark(p):
        kind = "Figures" if p.endswith(".png") else "Tables"
        caption = f"../report/{study}/{Path(p).stem}.rst"
        labels = {"name": Path(p).stem}
        return report(
            p, caption=caption, category=category, subcategory=kind, labels=labels
        )

    return [mark(p) if p.endswith((".png", ".html")) else p for p in paths]


def preflight_check():
    """Fail fast on endpoints the run could not use (unset keys, unreachable URLs)."""
    from memtrials.llm.cache import check_backend_for_executor
    from memtrials.llm.check import preflight

    plugin = workflow.executor_plugin
    check_backend_for_executor(
        config["cache"]["backend"],
        getattr(plugin, "name", None),
        bool(plugin is not None and plugin.common_settings.non_local_exec),
    )
    preflight(config, MODELS, PANEL + sorted(set(config["roles"].values())))


def hold_shared_servers():
    """Register this run as a user of the machine's shared servers (``memtrials.machine.hold_run``),
    so that another run on this machine, ending first, leaves them running."""
    from memtrials.machine import hold_run, server_dir

    hold_run(server_dir(config))


def stop_shared_servers():
    """Stop the embedded servers the run's cells shared (``servers.shared``), the environment
    fork servers (``envs.fork_server``) and the job server: all register in one folder.  While
    another run on this machine still holds them, leave them to it (they stop once idle).
    """
    from memtrials.llm.local.shared import end_run, server_dir

    stopped, others = end_run(server_dir(config))
    if others:
        logger.info(
            f"left the shared servers running: another run holds them (pid {', '.join(map(str, others))})"
        )
    if stopped:
        logger.info(f"stopped shared servers: {', '.join(stopped)}")


CONDA_ENV = "../../envs/memtrials.yaml"


def get_endpoint_params(model):
    """What of an endpoint entry determines a cell's output (never the key)."""
    return MODELS[model].cell_params()
