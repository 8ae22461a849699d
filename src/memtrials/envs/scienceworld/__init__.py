"""ScienceWorld: the adapter on its JVM engine.

* :mod:`.env` -- :class:`~memtrials.envs.scienceworld.env.ScienceWorldEnv`, the engine behind
  the :class:`~memtrials.envs.base.Env` interface, and the joined action list's switch;
* :mod:`.engine` -- the engine wrapper, started on a JVM of its own or on one borrowed from
  :mod:`.jvm` (warm JVMs shared by a machine's jobs), with a constant identity hash;
* :mod:`.tasks` -- task ids and the task table's rows; :mod:`.ambiguity` -- ambiguity prompts.

Nothing is imported here: importing the package loads no engine.
"""
