"""The protocol of an environment child: pickled ``(method, args)`` requests, ``(ok, value)`` replies.

A spawned child (:mod:`memtrials.envs.process.child`) and a forked one
(:mod:`memtrials.envs.process.forkserver`) both run :func:`serve` on their two streams.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any, BinaryIO


def send(fh: Any, value: Any) -> None:
    pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
    fh.flush()


def serve(rd: BinaryIO, wr: BinaryIO, name: str, options: dict[str, Any]) -> None:
    """The child: build the environment, then answer (method, args) requests until close
    (EOF: the parent is gone) or ``close`` (whose reply carries the child's CPU seconds and those
    of the shared JVMs lent to it while lent, which are no process's children)."""
    try:
        from memtrials.envs.engines import build_engine

        env = build_engine(name, **options)
    except BaseException as exc:  # report construction errors to the parent
        send(wr, (False, exc))
        return
    send(wr, (True, os.getpid()))
    while True:
        try:
            method, args = pickle.load(rd)
        except EOFError:
            break
        if method == "close":
            env.close()
            t = os.times()
            lent = sys.modules.get("memtrials.envs.scienceworld.jvm")  # shared JVMs lent to this child
            send(wr, (True, {"cpu_s": t.user + t.system, "lent_cpu_s": lent.LENT_CPU_S[0] if lent else 0.0}))
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
                send(wr, (True, (env.random_action(rng), rng.getstate())))
                continue
            send(wr, (True, getattr(env, method)(*args)))
        except BaseException as exc:
            send(wr, (False, exc))
