"""Optimized SAS translations deferred to the planner's ``replan`` (the TextWorld memo's ``lazy_replan`` part).

A part of :mod:`memtrials.envs.alfworld.speed`, switched by ``MEMTRIALS_TEXTWORLD_LAZY_REPLAN``.
Every new ``PddlState`` (a game load, and every reset) translates the problem a second time
with ``optimize=True`` for ``downward_lib.load_sas_replan``, which in fast-downward-textworld's
``libdownward`` only stores the string (``sas_replan = string(input)``); only ``replan`` reads
it (the planner expert, ``policy_commands``, a missing walkthrough).  Episodes never replan, so
the translation (~0.1-0.2 s of a new game's load) is deferred: inside ``PddlState.__init__``
(:func:`deferring`) the memo hands back a pending translation (:class:`PendingSas`) and the
state's library handle is a proxy (:class:`LibProxy`) that keeps the latest pending one per
library and translates and loads it right before the library's next ``replan`` (a later
``load_sas_replan`` replaces it, as the library's own global does).  The deferred translation
is the same memoized call as before.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

_lazy = threading.local()  # .on: inside our PddlState.__init__ (pending optimized translations)


def deferring() -> bool:
    """Whether this thread is inside a ``PddlState`` of :func:`lazy_state_class` being built
    (an optimized translation asked for now is handed back pending)."""
    return getattr(_lazy, "on", False)


class PendingSas:
    """The optimized SAS translation of (domain, problem), made only when ``replan`` needs it."""

    __slots__ = ("domain", "problem")

    def __init__(self, domain: str, problem: str) -> None:
        self.domain, self.problem = domain, problem

    def text(self) -> str:
        import fast_downward

        return fast_downward.pddl2sas(self.domain, self.problem, optimize=True)[1]  # the memo when installed

    def __str__(self) -> str:
        return self.text()

    def encode(self, encoding: str = "utf-8") -> "PendingBytes":  # PddlState encodes it for the library
        return PendingBytes(self, encoding)


class PendingBytes:
    """A :class:`PendingSas` encoded for the library: its bytes made on demand."""

    __slots__ = ("sas", "encoding")

    def __init__(self, sas: PendingSas, encoding: str) -> None:
        self.sas, self.encoding = sas, encoding

    def value(self) -> bytes:
        return self.sas.text().encode(self.encoding)


_pending: "weakref.WeakKeyDictionary[Any, PendingBytes]" = weakref.WeakKeyDictionary()
_pending_lock = threading.Lock()


class LibProxy:
    """A ``libdownward`` handle that defers a pending ``load_sas_replan`` to the next ``replan``."""

    __slots__ = ("_lib",)

    def __init__(self, lib: Any) -> None:
        self._lib = lib

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)

    def load_sas_replan(self, data: Any) -> None:
        with _pending_lock:
            if isinstance(data, PendingBytes):
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


def lazy_state_class(state_cls: Any) -> Any:
    """TextWorld's ``PddlState`` with its library handle proxied and its optimized translation
    deferred (module docstring)."""

    class PddlState(state_cls):  # pddl.py's name for it; only the library handle and laziness differ
        def __init__(self, downward_lib, pddl_problem, logic):
            lib = downward_lib if isinstance(downward_lib, LibProxy) else LibProxy(downward_lib)
            _lazy.on = True
            try:
                super().__init__(lib, pddl_problem, logic)
            finally:
                _lazy.on = False

    return PddlState
