"""Memoization of the pure parsing steps in TextWorld's PDDL backend (ALFWorld's engine).

ALFWorld runs on ``textworld.envs.PddlEnv`` (``textworld==1.7.0``).  Most of its time goes to
re-parsing the same texts: every game load parses every production rule's right-hand side
of the game's grammar (``alfred.twl2``) with tatsu; every step parses each admissible
action's command template (``grammar.derive``) and each rule condition
(``Rule.parse_conjunctive_query``) again; and every load and reset translates the same PDDL
domain and problem to SAS with fast-downward's translator, four times per game.
:func:`install` memoizes exactly these three steps, each keyed by its full input text and
options, in bounded LRU caches (:data:`CAPS`):

- ``textgen._parse_and_convert`` (a context-sensitive-grammar text, ``rule_name``): the
  tatsu *model* is cached and ``textgen._Converter().walk(model)`` is re-run on every call,
  so callers get fresh ``Symbol`` objects as before (``derive`` and ``replace`` set
  ``symbol.context`` on them);
- ``fast_downward.pddl2sas`` (domain, problem, ``optimize``): the ``(task, sas)`` pair is
  cached and shared; ``PddlState`` only reads the task (actions, types, objects, init);
- ``Rule.parse_conjunctive_query`` as ``textgen`` calls it (a condition such as
  ``r :: in(o, r)``): the ``Rule`` is cached and shared; ``State.all_assignments`` only
  reads it.

Two further parts, each with its own switch (:data:`PART_SWITCHES`, on by default):

- ``shallow_copy`` (``MEMTRIALS_TEXTWORLD_SHALLOW_COPY``): ``textgen.copy_context``, called
  ~400 times a step, deep-copies the context's ``variables`` (placeholder name ->
  ``EntityInfo``) and ``mapping`` (``Placeholder`` -> ``Variable``) dicts, about 80 object
  copies each; the replacement copies the two dicts and shares their values.  Proof that
  sharing is safe: in ``textgen`` the only writes through a context are
  ``context_["variables"].update`` and ``context_["mapping"].update`` in ``query``, on the
  dicts ``copy_context`` just made (still fresh dicts); ``EvalSymbol`` only reads attributes
  (the grammar's expressions are ``{o.name}``, ``{r.name or r.id}``, ``{o.indefinite}``,
  ``{o}``...); ``State.all_assignments`` copies the mapping it is given; ``Variable``,
  ``Placeholder`` and ``EntityInfo`` compare by value, and nothing there compares identity.
  The ``variables`` values are the engine's own ``_entity_infos`` objects in any case (the
  contexts ``PddlEnv`` builds hold them, and ``query`` adds them uncopied).  A value that is
  not a plain ``dict`` is deep-copied as before.
- ``lazy_replan`` (``MEMTRIALS_TEXTWORLD_LAZY_REPLAN``): the optimized SAS translation every new
  ``PddlState`` makes for ``replan``, which episodes never call, is deferred to the next ``replan``
  (:mod:`memtrials.envs.alfworld.replan`).
- ``disk_sas`` (``MEMTRIALS_TEXTWORLD_DISK_SAS``): the translations also persist on disk, so that
  a new process (an environment fork child, one per episode) reads a game's translation back
  instead of making it again, under a size cap (:mod:`memtrials.envs.alfworld.sas_disk`).

Measured and left out: the tatsu parse of a game's whole grammar document (about 40 ms of a
load; the rules inside it, parsed one by one afterwards, are the cost, and they hit the
first memo).

Why it is safe: tatsu's parse of a text is a function of the text and the parse options
(the parser holds no state between parses that changes its result; no RNG); the SAS
translator reads nothing but its arguments and the ``options`` module, which ``pddl2sas``
sets in full on every call (its other globals are statistics counters that only print, and
its output is captured and dropped unless ``verbose``).  Calls with tracing or verbose
output (``trace=True``, ``verbose=True``) bypass the memo.  Not reproduced on a hit:
``pddl2sas`` overwriting ``sys.argv`` (done on the first, missed call anyway).

Memory: a game's two translations hold about 1.3 MB (so :data:`CAPS` keeps at most ~21 MB of
them); the grammar entries are small parse trees of short texts.

Pinned to the versions in ``envs/constraints.txt`` (:data:`PINNED`): on any other version
:func:`install` logs a warning and installs nothing.  ``MEMTRIALS_TEXTWORLD_MEMO=0`` in the
environment switches all of it off (read at install time); the per-part switches turn one part
off.  Installing twice is a no-op.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from copy import deepcopy
from importlib import metadata
from typing import Any, Callable

from memtrials.envs.alfworld import replan, sas_disk

log = logging.getLogger(__name__)

SWITCH = "MEMTRIALS_TEXTWORLD_MEMO"
PINNED: dict[str, str] = {"textworld": "1.7.0", "TatSu": "5.8.3", "fast-downward-textworld": "20.6.4"}
PART_SWITCHES: dict[str, str] = {"shallow_copy": "MEMTRIALS_TEXTWORLD_SHALLOW_COPY",
                                 "lazy_replan": "MEMTRIALS_TEXTWORLD_LAZY_REPLAN",
                                 "disk_sas": "MEMTRIALS_TEXTWORLD_DISK_SAS"}
CAPS: dict[str, int] = {"csg_parse": 8192, "pddl2sas": 32, "query": 4096}

_lock = threading.Lock()
_originals: dict[str, Any] = {}
_caches: dict[str, Callable] = {}
_warned: list[bool] = []
_parts: set[str] = set()
_OFF = ("0", "false", "no", "off")


def enabled_by_env() -> bool:
    """False when ``MEMTRIALS_TEXTWORLD_MEMO`` is ``0``/``false``/``no``/``off``."""
    return os.environ.get(SWITCH, "1").strip().lower() not in _OFF


def part_enabled(part: str) -> bool:
    """False when the part's switch (:data:`PART_SWITCHES`) is ``0``/``false``/``no``/``off``."""
    return os.environ.get(PART_SWITCHES[part], "1").strip().lower() not in _OFF


def parts() -> frozenset[str]:
    """The optional parts in place in this process (subset of :data:`PART_SWITCHES`)."""
    return frozenset(_parts)


def version_mismatch() -> dict[str, tuple[str, str | None]]:
    """``{distribution: (pinned, installed)}`` for every pinned distribution not at its pin."""
    out = {}
    for dist, pin in PINNED.items():
        try:
            have: str | None = metadata.version(dist)
        except metadata.PackageNotFoundError:
            have = None
        if have != pin:
            out[dist] = (pin, have)
    return out


def installed() -> bool:
    """Whether the memo is in place in this process."""
    return bool(_originals)


def install() -> bool:
    """Install the memo (idempotent); returns whether it is in place afterwards."""
    with _lock:
        if _originals:
            return True
        if not enabled_by_env():
            return False
        bad = version_mismatch()
        if bad:
            if not _warned:
                _warned.append(True)
                log.warning("memtrials.envs.alfworld.speed: not installed, versions differ from the pins "
                            "it was checked against: %s", {k: f"pinned {p}, installed {h}" for k, (p, h) in bad.items()})
            return False
        import fast_downward
        from textworld.envs.pddl import textgen

        _originals.update(csg=textgen._parse_and_convert, pddl2sas=fast_downward.pddl2sas, rule=textgen.Rule)
        csg_model = functools.lru_cache(CAPS["csg_parse"])(
            lambda text, rule_name: textgen._PARSER.parse(text, rule_name=rule_name))
        sas = functools.lru_cache(CAPS["pddl2sas"])(_translate)
        rule_cls = _originals["rule"]
        query = functools.lru_cache(CAPS["query"])(rule_cls.parse_conjunctive_query)
        _caches.update(csg_parse=csg_model, pddl2sas=sas, query=query)

        def csg_parse_and_convert(text, rule_name=None, trace=False, **kw):
            if trace or kw or not isinstance(text, str):
                return _originals["csg"](text, rule_name=rule_name, trace=trace, **kw)
            return textgen._Converter().walk(csg_model(text, rule_name))

        def pddl2sas(domain, problem, verbose=False, optimize=False):
            if verbose:
                return _originals["pddl2sas"](domain, problem, verbose=verbose, optimize=optimize)
            if optimize and replan.deferring():  # PddlState discards the task of this one
                return None, replan.PendingSas(domain, problem)
            return sas(domain, problem, bool(optimize))

        class Rule(rule_cls):  # textgen's name for textworld.logic.Rule; only this classmethod differs
            @classmethod
            def parse_conjunctive_query(cls, expr):
                return query(expr)

        textgen._parse_and_convert = csg_parse_and_convert
        fast_downward.pddl2sas = pddl2sas
        textgen.Rule = Rule
        _install_parts({p for p in PART_SWITCHES if part_enabled(p)})
        return True


def _translate(domain: str, problem: str, optimize: bool):
    """The translation of (domain, problem): from the disk memo when the part is on, else made."""
    folder = sas_disk.sas_dir() if "disk_sas" in _parts else None
    if folder is None:
        return _originals["pddl2sas"](domain, problem, optimize=optimize)
    return sas_disk.translate(folder, domain, problem, optimize, PINNED, _originals["pddl2sas"])


def _shallow_copy_context(context):
    """``textgen.copy_context`` with the two dicts copied and their values shared (module docstring)."""
    variables, mapping = context["variables"], context["mapping"]
    return {
        "state": context["state"],
        "facts": context["facts"],
        "variables": dict(variables) if type(variables) is dict else deepcopy(variables),
        "mapping": dict(mapping) if type(mapping) is dict else deepcopy(mapping),
        "entity_infos": context["entity_infos"],
    }


def _install_parts(want: set[str]) -> None:
    from textworld.envs.pddl import logic as pddl_logic
    from textworld.envs.pddl import textgen

    if "shallow_copy" in want:
        _originals["copy_context"] = textgen.copy_context
        textgen.copy_context = _shallow_copy_context
        _parts.add("shallow_copy")
    if "disk_sas" in want:
        _parts.add("disk_sas")  # read by _translate
    if "lazy_replan" in want:
        state_cls = _originals["pddl_state"] = pddl_logic.PddlState
        pddl_logic.PddlState = replan.lazy_state_class(state_cls)
        _parts.add("lazy_replan")


def uninstall() -> None:
    """Put TextWorld's own functions back and drop the caches (for comparisons in one process)."""
    with _lock:
        if not _originals:
            return
        import fast_downward
        from textworld.envs.pddl import textgen

        textgen._parse_and_convert = _originals["csg"]
        fast_downward.pddl2sas = _originals["pddl2sas"]
        textgen.Rule = _originals["rule"]
        if "copy_context" in _originals:
            textgen.copy_context = _originals["copy_context"]
        if "pddl_state" in _originals:
            from textworld.envs.pddl import logic as pddl_logic

            pddl_logic.PddlState = _originals["pddl_state"]
        _originals.clear()
        _parts.clear()
        _caches.clear()


def stats() -> dict[str, dict[str, int]]:
    """Per memo: ``hits``, ``misses``, ``size`` (entries) and ``cap``; empty when not installed.
    With the ``disk_sas`` part, ``pddl2sas_disk``: its ``hits``, ``misses``, ``errors`` and ``pruned`` in this process."""
    out = {name: {"hits": c.cache_info().hits, "misses": c.cache_info().misses,
                  "size": c.cache_info().currsize, "cap": CAPS[name]} for name, c in _caches.items()}
    if "disk_sas" in _parts:
        out["pddl2sas_disk"] = dict(sas_disk.counts)
    return out
