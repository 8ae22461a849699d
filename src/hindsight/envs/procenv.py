"""An environment in its own process, behind the same interface.

AppWorld freezes the process clock (freezegun) while a world is open; in the process that
runs the actor's asyncio loop that stops every timer (the loop hangs).  AppWorld also fixes
its data root per process.  :class:`ProcessEnv` runs the environment in a spawned child
and forwards the interface calls over a pipe, so the actor's process never imports it.
``make_env("appworld")`` returns one by default (:data:`hindsight.envs.PROCESS_ENVS`).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import Any, Mapping, Sequence


def _send(fh: Any, value: Any) -> None:
    pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
    fh.flush()


def _serve(rfd: int, wfd: int, name: str, options: dict[str, Any]) -> None:
    """The child: build the environment, then answer (method, args) requests until close."""
    rd, wr = os.fdopen(rfd, "rb"), os.fdopen(wfd, "wb")
    try:
        from hindsight.envs.engines import build_engine

        env = build_engine(name, **options)
    except BaseException as exc:  # report construction errors to the parent
        _send(wr, (False, exc))
        return
    _send(wr, (True, None))
    while True:
        try:
            method, args = pickle.load(rd)
        except EOFError:
            break
        if method == "close":
            env.close()
            _send(wr, (True, None))
            # the environment is closed and the reply sent: leave without the interpreter's
            # teardown, which for AppWorld (thousands of modules and FastAPI routes) cost
            # 5.5 of an AppWorld child's 15 CPU-s and 11 s of wall at load 13 (its one
            # atexit handler, appworld.common.utils.clean_temp_directories, removes nothing)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        try:
            if method == "_random_action_with_state":
                import random

                rng = random.Random()
                rng.setstate(args[0])
                _send(wr, (True, (env.random_action(rng), rng.getstate())))
                continue
            _send(wr, (True, getattr(env, method)(*args)))
        except BaseException as exc:
            _send(wr, (False, exc))


class ProcessEnv:
    """``make_env(name, **options)`` in a child process (see module docstring).

    The child is ``python -m hindsight.envs.procenv`` (not multiprocessing: a spawned
    child would re-run the calling script); requests and replies are pickled over two
    private pipes, so whatever the environment prints cannot corrupt them.
    """

    thread_safe = True  # each object talks to its own child over its own pipes

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        self.name = name
        c_read, p_write = os.pipe()
        p_read, c_write = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "hindsight.envs.procenv", str(c_read), str(c_write), name,
             pickle.dumps(dict(options or {})).hex()],
            pass_fds=(c_read, c_write), stdin=subprocess.DEVNULL)
        os.close(c_read)
        os.close(c_write)
        self._rd, self._wr = os.fdopen(p_read, "rb"), os.fdopen(p_write, "wb")
        self._closed = False
        self._result()

    def _result(self) -> Any:
        try:
            ok, value = pickle.load(self._rd)
        except EOFError:
            raise RuntimeError(f"{self.name} environment process exited (code {self._proc.poll()})") from None
        if not ok:
            raise value
        return value

    def _call(self, method: str, *args: Any) -> Any:
        if self._closed:
            raise RuntimeError(f"{self.name} environment process is closed")
        _send(self._wr, (method, args))
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
            self._call("close")
        except (RuntimeError, OSError, EOFError, BrokenPipeError):
            pass
        finally:
            self._closed = True
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
    _serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], pickle.loads(bytes.fromhex(sys.argv[4])))
