"""ALFWorld: the adapter on its TextWorld engine and the offline games it plays.

* :mod:`.env` -- :class:`~memtrials.envs.alfworld.env.AlfworldEnv`, the engine behind the
  :class:`~memtrials.envs.base.Env` interface, and the task table's rows;
* :mod:`.gen` -- the offline game generator (scenes from :mod:`.scenes`), whose games are
  solved by :mod:`.solve` (ALFWorld's planner expert, :mod:`.planner`, or the generator's oracle);
* :mod:`.speed` -- the memo of TextWorld's PDDL backend (parts in :mod:`.replan` and :mod:`.sas_disk`).

Nothing is imported here: importing the package loads no engine.
"""
