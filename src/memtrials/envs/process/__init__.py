"""Environments in child processes, behind the same interface.

* :mod:`.child` -- :class:`~memtrials.envs.process.child.ProcessEnv`, an environment in its own
  process (spawned, or forked from a fork server);
* :mod:`.forkserver` -- a warm per-machine process that forks environment children;
* :mod:`.protocol` -- the pickled requests and replies between a parent and its child.

Nothing is imported here: importing the package loads no engine.
"""
