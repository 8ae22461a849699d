"""One subpackage per study (what a cell runs, its analysis, its tables and figures), and the
registry of the studies the workflow runs: :data:`STUDIES`.

Each registered study is a :class:`memtrials.pipeline.study.Study` subclass named by
``"module:Class"``, imported only when it is asked for (:func:`study_class`), so importing
this package imports no study.  The workflow (``Snakefile``, ``workflow/rules/common.smk``:
``study(name)``) includes ``workflow/rules/<name>.smk`` and builds the study for every name
here, and ``python -m memtrials config check`` runs every registered study's checks.  A
built-in study is one line of :data:`STUDIES`; a user's study (or a test's) is added with
:func:`register` before the workflow or the check reads the registry.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memtrials.pipeline.study import Study

STUDIES: dict[str, str | type[Study]] = {
    "luck": "memtrials.studies.luck.workflow:LuckWorkflow",
    "history": "memtrials.studies.history.workflow:HistoryWorkflow",
    "calibrator": "memtrials.studies.history.calibrator.workflow:CalibratorWorkflow",
    "playbook": "memtrials.studies.playbook.workflow:PlaybookWorkflow",
    "antipersist": "memtrials.studies.antipersist.workflow:AntipersistWorkflow",
}
"""Registry name (the study's ``name``: config section, rules file, results folder, docs
page) -> its study class, as ``"module:Class"`` or the class itself; in this order the
workflow includes the rules files and ``config check`` runs the checks."""


def register(name: str, study: str | type[Study]) -> None:
    """Add study ``name`` (``"module:Class"`` or the class) after the built-in ones; refuses
    a name already registered."""
    if name in STUDIES:
        raise ValueError(f"study {name!r} is already registered ({STUDIES[name]!r})")
    STUDIES[name] = study


def study_class(name: str) -> type[Study]:
    """The class of registered study ``name`` (imported on first use)."""
    from memtrials.pipeline.study import Study

    if name not in STUDIES:
        raise KeyError(f"no study {name!r} is registered (registered: {', '.join(STUDIES)})")
    entry = STUDIES[name]
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
    if not (isinstance(entry, type) and issubclass(entry, Study)) or entry.name != name:
        raise TypeError(f"registry entry {name!r}: {entry!r} is not a Study subclass whose name is {name!r}")
    return entry


def study_names() -> list[str]:
    """The registered studies' names, in registry order."""
    return list(STUDIES)


def study_classes() -> list[type[Study]]:
    """The registered studies' classes, in registry order."""
    return [study_class(name) for name in STUDIES]
