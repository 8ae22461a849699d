"""ScienceWorld's engine (the package's Python wrapper over its JVM), started on a JVM of its own
or on one borrowed from :mod:`memtrials.envs.scienceworld.jvm`.

Every JVM starts with a constant identity hash (:data:`JVM_OPTIONS`).  Under HotSpot's
default the order of a room's objects and doors in an observation followed the JVM's identity
hashes, seeded per thread from how many threads (compiler, GC, py4j) the JVM had started: another
garbage collector, ``-Xint``, the join (fewer py4j round trips) or a busy machine (compiler
threads started at other moments) printed another order, now and then even between two fresh
runs.  With the constant hash the order is that in which objects were added, so the same
actions in a fresh process give the same observations and action lists, byte for byte, under
every JVM variant tried (tests/envs/test_scienceworld.py runs the second process with another
collector, with and without the join).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from memtrials.envs.scienceworld import jvm as scienceworld_jvm

# HotSpot's default identity hash (hashCode=5) seeds each JVM thread from a global random
# sequence that every thread start advances, and ScienceWorld keeps a room's objects in hashed
# sets: which compiler and GC threads the JVM happened to start before py4j's connection thread
# decided the order of a room's objects and doors (seen: another order under load, with
# -XX:+UseSerialGC and with -Xint).  A constant identity hash (hashCode=2) makes that order
# depend on the order objects were added alone: the same output under every JVM variant tried
# (tests/envs/test_scienceworld.py), at no measured cost per step.
JVM_OPTIONS = ("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2")
_LAUNCH_LOCK = threading.Lock()


@functools.cache
def lent_engine_class() -> Any:
    """ScienceWorld's Python wrapper over a borrowed JVM (:mod:`memtrials.envs.scienceworld.jvm`):
    its own py4j connection and engine object; closing it ends the connection, never the JVM.
    Made on first use (it subclasses the package's wrapper, imported only then)."""
    import tempfile

    from py4j.java_gateway import GatewayParameters, JavaGateway
    from scienceworld import ScienceWorldEnv as _Engine

    class LentEngine(_Engine):  # type: ignore[misc, valid-type]
        def __init__(self, gateway_port: int) -> None:  # the wrapper's own start, less the launch
            self._gateway = JavaGateway(gateway_parameters=GatewayParameters(auto_field=True, port=gateway_port))
            self.server = self._gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()
            self.lastStepScore = 0
            self.taskName = None
            self.envStepLimit = 10**9
            self.clear_run_histories()
            self.goldPathGenerated = False
            self._obj_tree_tempdir = tempfile.TemporaryDirectory()

        def close(self) -> None:
            gateway, self._gateway = getattr(self, "_gateway", None), None
            if gateway is None:
                return
            for end in (lambda: gateway.detach(self.server), gateway.close):
                try:
                    end()
                except Exception:  # noqa: BLE001  (the JVM may be gone; it is not ours to stop)
                    pass
            # the JVM is another borrower's now: py4j objects finalized later must not connect
            gateway._gateway_client.is_connected = False

    return LentEngine


@functools.cache
def own_engine_class() -> Any:
    """ScienceWorld's Python wrapper over a JVM of its own, with a ``close`` that runs once and
    tolerates a JVM already gone. The package's ``close`` writes a newline to the JVM's stdin and
    its ``__del__`` calls ``close`` again at garbage collection: once the JVM has closed its stdin,
    that write raised ``BrokenPipeError``, printed as an "Exception ignored in ... __del__"
    traceback in a run's log. Made on first use (it subclasses the package's wrapper)."""
    from scienceworld import ScienceWorldEnv as _Engine

    class OwnEngine(_Engine):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._memtrials_closed = False  # set once started: a start that failed has nothing to close

        def close(self) -> None:
            if getattr(self, "_memtrials_closed", True):  # closed, or never started
                return
            self._memtrials_closed = True
            try:
                super().close()
            except (BrokenPipeError, ConnectionError, OSError):  # the JVM went first: nothing to stop
                pass

    return OwnEngine


def start_engine(engine_class: Any) -> Any:
    """Start ScienceWorld's JVM with :data:`JVM_OPTIONS` (through ``JAVA_TOOL_OPTIONS``, after
    any the user set: the package's launcher takes no JVM options), restoring the variable after."""
    with _LAUNCH_LOCK, scienceworld_jvm.java_tool_options(JVM_OPTIONS):
        return engine_class("", envStepLimit=10**9)
