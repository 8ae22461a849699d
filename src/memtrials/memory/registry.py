"""Memories by name: the built-in memory classes, and a user's memory classes named in the config.

**Built-in** (:data:`BUILTIN`): the memories the studies build today, by the names they
use; each study builds its own with its own settings (``studies/playbook/design.py``,
``studies/antipersist/memories.py``), and :func:`memory_class` resolves a name.

**A user's memory** is an entry of the config's top-level ``memory:`` section (default
``{}``)::

    memory:
      notes:                                 # its name: [a-z][a-z0-9_]*
        class: notes_memory:NotesMemory      # "module:Class", imported with importlib
        options: {k: 3}                      # keyword arguments of the constructor

The module is found on ``sys.path`` (``PYTHONPATH=examples/byo_memory`` for the example of
``docs/memory.md``).  A study names it ``memory-<name>`` (:data:`PREFIX`): in
``playbook.systems`` (a growth system, its setting's variant ``memory-<name>``), in
``antipersist.designs`` (a design) and in ``history.continuation.conditions`` (a
continuation condition).  The study builds it as ``Class(context=MemoryContext(...),
**options)`` (:func:`build`): the context says which endpoints to call and which seed to
draw with (:class:`memtrials.memory.base.MemoryContext`); the class is whatever
:mod:`memtrials.memory.base` asks of it: the lifecycle (:data:`LIFECYCLE`), plus ``playbook()``
where its lessons are measured and curated (:data:`PLAYBOOK`).  Which of the two a study needs
is the study's to say: it hands the methods down to :func:`check_memory` (this layer names no
study).

**Checks before any job** (each study's ``check()``, so also ``python -m memtrials config
check``): :func:`check_memory` refuses, with a :class:`memtrials.config.ConfigError` naming
the key and the fix, a name that is not configured, a module that does not import, a
missing class, a class without a method the study needs, and options (or a missing
``context`` keyword) its constructor does not accept (its signature is read; nothing is
built).  A job's config slice holds the entry (:func:`memory_entry`), so changed options
rerun it, and its ``code`` input the module's file (:func:`source_files`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
from typing import Any, Mapping

from memtrials.config import ConfigError
from memtrials.memory.base import Memory, MemoryContext

PREFIX = "memory-"
NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
BUILTIN: dict[str, str] = {
    "lesson_log": "memtrials.memory.lessons:LessonLog",
    "ace": "memtrials.memory.ace:ACEPlaybook",
    "dc": "memtrials.memory.cheatsheet:Cheatsheet",
    "trajectory": "memtrials.memory.trajectory:TrajectoryMemory",
    "abstraction": "memtrials.memory.abstraction:AbstractionMemory",
    "joint": "memtrials.memory.abstraction:JointMemory",
    "antipersistence": "memtrials.memory.antipersist:AntiPersistenceMemory",
    "reflexion": "memtrials.memory.reflexion:ReflexionMemory",
    "expel": "memtrials.memory.expel:ExpeLMemory",
    "autorefine": "memtrials.memory.autorefine:AutoRefineMemory",
}
"""Built-in memory name -> ``"module:Class"`` (the playbook study's growth systems ``ace``
and ``dc``, the anti-persistence study's designs and baselines, the reference lesson log)."""
LIFECYCLE: tuple[str, ...] = ("frozen", "update", "state", "load")
"""The methods every protocol calls (besides the ``kind`` class attribute): a memory that is
served, learns and is snapshotted (:class:`memtrials.memory.base.Memory`)."""
PLAYBOOK: tuple[str, ...] = (*LIFECYCLE, "playbook")
"""The lifecycle plus ``playbook()``: a memory whose lessons are measured and curated
(:class:`memtrials.memory.base.PlaybookMemory`)."""


def memory_name(ref: str) -> str | None:
    """``"memory-notes"`` -> ``"notes"``; ``None`` for a name that does not name a user's memory."""
    return ref[len(PREFIX):] if ref.startswith(PREFIX) else None


def memory_entry(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The config slice of user memory ``name``: ``{name, class, options}``."""
    entry = config["memory"][name]
    return {"name": name, "class": str(entry["class"]), "options": dict(entry["options"])}


def memory_class(spec: str, key: str = "memory") -> type:
    """The class of a built-in name (:data:`BUILTIN`) or of ``"module:Class"``; a
    :class:`ConfigError` naming ``key`` when it cannot be had."""
    spec = BUILTIN.get(spec, spec)
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ConfigError(f"config key {key}: {spec!r} is not 'module:Class'. Fix: write the module's dotted name, "
                          "a colon and the class name, e.g. notes_memory:NotesMemory")
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # any failure while importing the user's module is the config's to report
        raise ConfigError(f"config key {key}: module {module!r} does not import ({type(exc).__name__}: {exc}). "
                          "Fix: put the folder that holds it on PYTHONPATH (e.g. PYTHONPATH=examples/byo_memory) "
                          "or correct the module name") from None
    cls = getattr(mod, attr, None)
    if not isinstance(cls, type):
        found = sorted(n for n, v in vars(mod).items() if isinstance(v, type) and v.__module__ == mod.__name__)
        raise ConfigError(f"config key {key}: module {module!r} has no class {attr!r} (its classes: "
                          f"{', '.join(found) or 'none'}). Fix: correct the class name")
    return cls


def check_class(cls: type, needs: tuple[str, ...], user: str, key: str) -> None:
    """``cls`` has a ``kind`` (a string class attribute, or a property where it depends on the
    options) and the methods ``needs`` that ``user`` (e.g. "the playbook study") calls,
    ``update`` async."""
    name = cls.__name__
    if not isinstance(getattr(cls, "kind", None), (str, property)):
        raise ConfigError(f"config key {key}: {name} has no class attribute `kind` (a string naming what its state "
                          "holds). Fix: add one, e.g. kind = \"notes\" (docs/memory.md)")
    missing = [m for m in needs if not callable(getattr(cls, m, None))]
    if missing:
        raise ConfigError(f"config key {key}: {name} lacks the method(s) {', '.join(missing)} that {user} "
                          f"calls (it needs {', '.join(needs)}). Fix: add them (memtrials.memory.base, "
                          "docs/memory.md)")
    if not inspect.iscoroutinefunction(getattr(cls, "update")):
        raise ConfigError(f"config key {key}: {name}.update is not async. Fix: define it as "
                          "`async def update(self, client, episodes)`")


def check_options(cls: type, options: Mapping[str, Any], key: str) -> None:
    """``cls(context=..., **options)`` binds (the constructor's signature is read, nothing is built)."""
    sig = inspect.signature(cls)
    takes = [p for p in sig.parameters if p != "context"]
    if "context" not in sig.parameters and not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        raise ConfigError(f"config key {key}.class: {cls.__name__}'s constructor takes no `context` keyword. Fix: "
                          "add `context: MemoryContext` to its __init__ (memtrials.memory.base; docs/memory.md)")
    try:
        sig.bind(context=None, **options)
    except TypeError as exc:
        raise ConfigError(f"config key {key}.options: {cls.__name__} does not accept these options ({exc}); it "
                          f"takes: {', '.join(takes) or 'no option'}. Fix: correct or remove them") from None


def check_memory(config: Mapping[str, Any], ref: str, key: str, *, needs: tuple[str, ...] = LIFECYCLE,
                 user: str = "the study") -> dict[str, Any]:
    """Check the user memory ``ref`` (``memory-<name>``, listed at config ``key``) for a study
    that calls ``needs`` (module docstring; ``user`` names the study in messages); return its
    config slice (:func:`memory_entry`)."""
    name = memory_name(ref)
    section = config["memory"]
    if name is None or name not in section:
        raise ConfigError(f"config key {key}: {ref!r} names no memory of the config's memory section (configured: "
                          f"{', '.join(PREFIX + n for n in section) or 'none'}). Fix: add `memory: {{{name or ref}: "
                          "{class: module:Class, options: {}}}}` or correct the name")
    if not NAME.match(name):
        raise ConfigError(f"config key memory.{name}: the name must match {NAME.pattern[:-2]} (it is part of "
                          "paths and wildcards). Fix: rename it")
    entry = memory_entry(config, name)
    where = f"memory.{name}"
    cls = memory_class(entry["class"], f"{where}.class")
    check_class(cls, needs, user, f"{where}.class")
    check_options(cls, entry["options"], where)
    return entry


def build(entry: Mapping[str, Any], context: MemoryContext) -> Memory:
    """A fresh memory of a job's config slice ``entry`` (:func:`memory_entry`)."""
    cls = memory_class(str(entry["class"]), f"memory.{entry['name']}.class")
    return cls(context=context, **dict(entry["options"]))


def source_files(config: Mapping[str, Any], ref: str) -> list[str]:
    """The file of the module that defines user memory ``ref`` (a rule's ``code`` input:
    an edit reruns its jobs); none for any other name."""
    name = memory_name(ref)
    if name is None or name not in config["memory"]:
        return []
    spec = importlib.util.find_spec(str(config["memory"][name]["class"]).partition(":")[0])
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    rel = os.path.relpath(spec.origin)
    return [spec.origin if rel.startswith("..") else rel]
