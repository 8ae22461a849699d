"""AppWorld: the adapter on its engine and evaluator, and the project-authored offline task set.

* :mod:`.env` -- :class:`~memtrials.envs.appworld.env.AppWorldEnv`, the engine behind the
  :class:`~memtrials.envs.base.Env` interface, and the task table's rows;
* :mod:`.tasks` -- the authored task set (its families in :mod:`.families`, its cast in
  :mod:`.cast`), built into an offline data root by :mod:`.data`;
* :mod:`.manifest` -- the checked-in verification of every task by AppWorld's evaluator
  (``verification.json`` here), remade by :mod:`.verify`.

Nothing is imported here: importing the package loads no engine.
"""
