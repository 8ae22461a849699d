"""An environment in its own process, behind the same interface.

AppWorld freezes the process clock (freezegun) while a world is open; in the process that
runs the actor's asyncio loop that stops every timer (the loop hangs).  AppWorld also fixes
its data root per process.  :class:`ProcessEnv` runs the environment in a spawned child
and forwards the interface calls over a pipe, so the actor's process never imports it.
``make_env("appworld")`` returns one by default (:data:`memtrials.envs.PROCESS_ENVS`).

With ``envs.fork_server`` the child is instead forked from a warm per-machine process that
has imported the engine already (:mod:`memtrials.envs.process.forkserver`) and the calls go over a
Unix socket; the protocol (:func:`memtrials.envs.process.protocol.serve`) and this interface are the same either way.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
from typing import Any, Mapping, Sequence

from memtrials.envs.process.protocol import send, serve

log = logging.getLogger(__name__)


class ProcessEnv:
    """``make_env(name, **options)`` in a child process (see module docstring).

    The child is ``python -m memtrials.envs.process.child`` (not multiprocessing: a spawned
    child would re-run the calling script); requests and replies are pickled over two
    private pipes, so whatever the environment prints cannot corrupt them.
    """

    thread_safe = True  # each object talks to its own child over its own pipes

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self._closed = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: Any = None
        self.forked = False  # whether the child came from a fork server
        opts = dict(options or {})
        from memtrials.envs.process import forkserver

        if forkserver.settings() is not None and name in forkserver.FORK_ENVS:
            try:
                self._sock = forkserver.open_child(name, opts)
                self._rd, self._wr = self._sock.makefile("rb"), self._sock.makefile("wb")
                self.pid = self._first_reply()
                self.forked = True
                return
            except forkserver.Unavailable as exc:
                log.warning("%s environment: no fork server (%s); spawning a child instead", name, exc)
                self._drop_socket()
        self._spawn(opts)

    def _spawn(self, opts: dict[str, Any]) -> None:
        c_read, p_write = os.pipe()
        p_read, c_write = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "memtrials.envs.process.child", str(c_read), str(c_write), self.name,
             pickle.dumps(opts).hex()],
            pass_fds=(c_read, c_write), stdin=subprocess.DEVNULL)
        os.close(c_read)
        os.close(c_write)
        self._rd, self._wr = os.fdopen(p_read, "rb"), os.fdopen(p_write, "wb")
        self.pid = self._result()

    def _first_reply(self) -> int:
        """The forked child's build outcome; its death before replying means no fork server."""
        from memtrials.envs.process.forkserver import Unavailable

        try:
            ok, value = pickle.load(self._rd)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            raise Unavailable(f"the forked child closed before its first reply ({exc!r})") from None
        if not ok:
            self._drop_socket()
            self._closed = True
            raise value
        return int(value)

    def _drop_socket(self) -> None:
        for fh in (getattr(self, "_rd", None), getattr(self, "_wr", None), self._sock):
            if fh is not None:
                try:
                    fh.close()
                except OSError:
                    pass
        self._sock = None

    def _result(self) -> Any:
        try:
            ok, value = pickle.load(self._rd)
        except EOFError:
            code = self._proc.poll() if self._proc is not None else "unknown: forked"
            raise RuntimeError(f"{self.name} environment process exited (code {code})") from None
        if not ok:
            raise value
        return value

    def _call(self, method: str, *args: Any) -> Any:
        if self._closed:
            raise RuntimeError(f"{self.name} environment process is closed")
        send(self._wr, (method, args))
        return self._result()

    def reset(self, task_id: str) -> Any:
        return self._call("reset", task_id)

    def step(self, action: str) -> Any:
        return self._call("step", action)

    def task_description(self) -> str:
        return self._call("task_description")

    def admissible_actions(self) -> Any:
        return self._call("admissible_actions")

    def restore(self, task_id: str, actions: Sequence[str], expected: Sequence[str] | None = None) -> Any:
        return self._call("restore", task_id, list(actions), None if expected is None else list(expected))

    def gold_actions(self, task_id: str) -> Any:
        return self._call("gold_actions", task_id)

    def random_action(self, rng: Any) -> str:
        """A random action drawn in the child; ``rng`` advances as if drawn here."""
        action, state = self._call("_random_action_with_state", rng.getstate())
        rng.setstate(state)
        return action

    def close(self) -> None:
        if self._closed:
            return
        try:
            reply = self._call("close")
            if isinstance(reply, dict):
                if self.forked:  # a spawned child's own CPU reaches the job's rusage when it is waited for
                    from memtrials.envs.process.forkserver import FORKED_CPU_S

                    FORKED_CPU_S[0] += float(reply.get("cpu_s", 0.0))
                if reply.get("lent_cpu_s"):  # a JVM lent to the child is nobody's child: counted here
                    from memtrials.envs.scienceworld.jvm import LENT_CPU_S

                    LENT_CPU_S[0] += float(reply["lent_cpu_s"])
        except (RuntimeError, OSError, EOFError, BrokenPipeError):
            pass
        finally:
            self._closed = True
            if self._proc is None:  # a forked child: EOF on its socket ends it, its server reaps it
                self._drop_socket()
                return
            for fh in (self._rd, self._wr):
                try:
                    fh.close()
                except OSError:
                    pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


if __name__ == "__main__":
    serve(os.fdopen(int(sys.argv[1]), "rb"), os.fdopen(int(sys.argv[2]), "wb"), sys.argv[3],
          pickle.loads(bytes.fromhex(sys.argv[4])))
