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
- ``lazy_replan`` (``MEMTRIALS_TEXTWORLD_LAZY_REPLAN``): every new ``PddlState`` (a game
  load, and every reset) translates the problem a second time with ``optimize=True`` for
  ``downward_lib.load_sas_replan``, which in fast-downward-textworld's ``libdownward`` only
  stores the string (``sas_replan = string(input)``); only ``replan`` reads it (the planner
  expert, ``policy_commands``, a missing walkthrough).  Episodes never replan, so the
  translation (~0.1-0.2 s of a new game's load) is deferred: inside ``PddlState.__init__``
  the memo hands back a pending translation and the state's library handle is a proxy that
  keeps the latest pending one per library and translates and loads it right before the
  library's next ``replan`` (a later ``load_sas_replan`` replaces it, as the library's own
  global does).  The deferred translation is the same memoized call as before.

- ``disk_sas`` (``MEMTRIALS_TEXTWORLD_DISK_SAS``): the translations also persist on disk, one
  pickle per (domain, problem, ``optimize``) under :func:`sas_dir` (``$MEMTRIALS_TEXTWORLD_SAS_DIR``,
  else ``<venv>/share/memtrials/textworld-sas``; an empty value switches it off), named by the
  SHA-256 of the inputs, the pinned versions and :data:`DISK_FORMAT`.  The in-memory memo is per
  process, and an environment fork child is a new process per episode, so every episode on a game
  the child had not seen paid the translation again: about 0.2 CPU-s of a new game's 0.25
  (measured on 13 default games: 2.9 of 3.6 CPU-s), some 45 CPU-s of a fully cached rerun of the
  default run.  Reading the pickle takes about 1 ms (0.18 MB).  Written to a temporary file and
  renamed, so a reader never sees half a file; an unreadable or corrupt file is translated again
  and replaced; a folder that cannot be written leaves the memo in memory only.  The translator's
  output is a function of its inputs (below), and ``PddlState`` reads the task's actions, types,
  objects and initial facts, which pickling keeps whole (shared references included).
  The folder is kept under a size cap (``$MEMTRIALS_TEXTWORLD_SAS_MAX_MB``, default
  :data:`SAS_MAX_MB_DEFAULT`; 0 keeps nothing): a hit marks its file used (its modification
  time), and after each write the least recently used files go until the folder is under
  nine tenths of the cap (about 0.3 MB a game: the default run's games take some 100 MB, the
  paper's whole ALFWorld set about 1.1 GB).

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
import hashlib
import logging
import os
import pickle
import sys
import threading
import weakref
from copy import deepcopy
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)

SWITCH = "MEMTRIALS_TEXTWORLD_MEMO"
PINNED: dict[str, str] = {"textworld": "1.7.0", "TatSu": "5.8.3", "fast-downward-textworld": "20.6.4"}
PART_SWITCHES: dict[str, str] = {"shallow_copy": "MEMTRIALS_TEXTWORLD_SHALLOW_COPY",
                                 "lazy_replan": "MEMTRIALS_TEXTWORLD_LAZY_REPLAN",
                                 "disk_sas": "MEMTRIALS_TEXTWORLD_DISK_SAS"}
SAS_DIR = "MEMTRIALS_TEXTWORLD_SAS_DIR"
SAS_MAX_MB = "MEMTRIALS_TEXTWORLD_SAS_MAX_MB"
SAS_MAX_MB_DEFAULT = 2048
DISK_FORMAT = 1
"""Part of every disk entry's name: bump it when what is stored changes."""
CAPS: dict[str, int] = {"csg_parse": 8192, "pddl2sas": 32, "query": 4096}

_lock = threading.Lock()
_originals: dict[str, Any] = {}
_caches: dict[str, Callable] = {}
_warned: list[bool] = []
_warned_cap: list[bool] = []
_parts: set[str] = set()
_lazy = threading.local()  # .on: inside our PddlState.__init__ (pending optimized translations)
_OFF = ("0", "false", "no", "off")
_disk = {"hits": 0, "misses": 0, "errors": 0, "pruned": 0}


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
            if optimize and getattr(_lazy, "on", False):  # PddlState discards the task of this one
                return None, _PendingSas(domain, problem)
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


def sas_dir() -> Path | None:
    """Where the ``disk_sas`` part keeps translations (module docstring); None when switched off."""
    env = os.environ.get(SAS_DIR)
    if env is not None:
        return Path(env) if env.strip() else None
    return Path(sys.prefix) / "share" / "memtrials" / "textworld-sas"


def _translate(domain: str, problem: str, optimize: bool):
    """The translation of (domain, problem): from the disk memo when the part is on, else made."""
    folder = sas_dir() if "disk_sas" in _parts else None
    if folder is None:
        return _originals["pddl2sas"](domain, problem, optimize=optimize)
    key = hashlib.sha256(repr((DISK_FORMAT, sorted(PINNED.items()), sys.version_info[:2], bool(optimize),
                               domain, problem)).encode()).hexdigest()
    path = folder / f"{key[:32]}.pickle"
    try:
        with open(path, "rb") as fh:
            value = pickle.load(fh)
        _disk["hits"] += 1
        try:
            os.utime(path)  # used now: the pruning keeps it over older ones
        except OSError:
            pass
        return value
    except FileNotFoundError:
        pass
    except Exception as exc:  # a corrupt or foreign file: translate again and replace it
        _disk["errors"] += 1
        log.warning("memtrials.envs.alfworld.speed: unreadable translation %s (%s); translating again", path, exc)
    _disk["misses"] += 1
    value = _originals["pddl2sas"](domain, problem, optimize=optimize)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError as exc:
        _disk["errors"] += 1
        log.debug("memtrials.envs.alfworld.speed: translation not stored in %s (%s)", folder, exc)
    else:
        _disk["pruned"] += prune_sas_dir(folder, sas_max_bytes())
    return value


def sas_max_bytes() -> int:
    """The disk memo's size cap in bytes (``$MEMTRIALS_TEXTWORLD_SAS_MAX_MB``; a value that is not a
    number of megabytes >= 0 is reported once and the default used)."""
    raw = os.environ.get(SAS_MAX_MB)
    mb: float = SAS_MAX_MB_DEFAULT
    if raw is not None and raw.strip():
        try:
            mb = float(raw)
            if not mb >= 0:
                raise ValueError
        except ValueError:
            mb = SAS_MAX_MB_DEFAULT
            if not _warned_cap:
                _warned_cap.append(True)
                log.warning("memtrials.envs.alfworld.speed: %s=%r is not a size in megabytes (a number >= 0); "
                            "using %d", SAS_MAX_MB, raw, SAS_MAX_MB_DEFAULT)
    return int(mb * 1024 * 1024)


def prune_sas_dir(folder: Path, max_bytes: int) -> int:
    """Delete the least recently used translations in ``folder`` until it holds at most nine tenths
    of ``max_bytes`` (nothing while it is within ``max_bytes``); how many were deleted.  Safe beside
    other processes: a reader of a deleted file translates again, a file gone already is skipped."""
    entries = []
    total = 0
    try:
        with os.scandir(folder) as it:
            for e in it:
                if not e.name.endswith(".pickle") or e.name.startswith("."):
                    continue
                try:
                    st = e.stat()
                except OSError:
                    continue
                entries.append((st.st_mtime_ns, e.name, st.st_size))
                total += st.st_size
    except OSError:
        return 0
    if total <= max_bytes:
        return 0
    goal = max_bytes * 9 // 10
    removed = 0
    for _, name, size in sorted(entries):
        if total <= goal:
            break
        try:
            (folder / name).unlink()
            removed += 1
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= size
    return removed


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


class _PendingSas:
    """The optimized SAS translation of (domain, problem), made only when ``replan`` needs it."""

    __slots__ = ("domain", "problem")

    def __init__(self, domain: str, problem: str) -> None:
        self.domain, self.problem = domain, problem

    def text(self) -> str:
        import fast_downward

        return fast_downward.pddl2sas(self.domain, self.problem, optimize=True)[1]  # the memo when installed

    def __str__(self) -> str:
        return self.text()

    def encode(self, encoding: str = "utf-8") -> "_PendingBytes":  # PddlState encodes it for the library
        return _PendingBytes(self, encoding)


class _PendingBytes:
    __slots__ = ("sas", "encoding")

    def __init__(self, sas: _PendingSas, encoding: str) -> None:
        self.sas, self.encoding = sas, encoding

    def value(self) -> bytes:
        return self.sas.text().encode(self.encoding)


_pending: "weakref.WeakKeyDictionary[Any, _PendingBytes]" = weakref.WeakKeyDictionary()
_pending_lock = threading.Lock()


class _LibProxy:
    """A ``libdownward`` handle that defers a pending ``load_sas_replan`` to the next ``replan``."""

    __slots__ = ("_lib",)

    def __init__(self, lib: Any) -> None:
        self._lib = lib

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)

    def load_sas_replan(self, data: Any) -> None:
        with _pending_lock:
            if isinstance(data, _PendingBytes):
                _pending[self._lib] = data  # the library only stores the string; a later load replaces it
                return None
            _pending.pop(self._lib, None)
        return self._lib.load_sas_replan(data)

    def replan(self, *args: Any) -> Any:
        with _pending_lock:
            data = _pending.pop(self._lib, None)
        if data is not None:
            self._lib.load_sas_replan(data.value())
        return self._lib.replan(*args)


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

        class PddlState(state_cls):  # pddl.py's name for it; only the library handle and laziness differ
            def __init__(self, downward_lib, pddl_problem, logic):
                lib = downward_lib if isinstance(downward_lib, _LibProxy) else _LibProxy(downward_lib)
                _lazy.on = True
                try:
                    super().__init__(lib, pddl_problem, logic)
                finally:
                    _lazy.on = False

        pddl_logic.PddlState = PddlState
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
        out["pddl2sas_disk"] = dict(_disk)
    return out
