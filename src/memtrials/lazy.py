"""A package's public names loaded from their submodules on first use (PEP 562), written once.

A package that re-exports names from heavy submodules (the model layer's SDK, SciPy, the
environments' engines) lists them in a module-level dict ``_WHERE = {name: submodule}`` and
takes its ``__getattr__`` and ``__dir__`` from :func:`lazy_names`, so that importing the
package, or one light module of it, loads nothing else.  The static code sets read the same
``_WHERE`` literal to follow an imported name to the module that defines it
(:func:`memtrials.pipeline.codesets.defining_modules`).  Imports nothing from ``memtrials``.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(package: str, where: Mapping[str, str], *, submodules: bool = False
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: a name of ``where`` is read from
    ``package.<where[name]>`` on first use and kept in the package; with ``submodules``, any
    other name is tried as a submodule (``memtrials.llm.client`` without importing it first)."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            if submodules:
                try:
                    return importlib.import_module(f"{package}.{name}")
                except ModuleNotFoundError as exc:
                    if exc.name != f"{package}.{name}":
                        raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
