"""The planted world: a tiny text environment whose tasks a capable reader solves and whose
answers are known, for the known-answer runs (issue 38; docs/environments.md, "The planted world").

* :mod:`.world` -- the seeded task content (a pure function of the task id) and
  :func:`~.world.right_action`, what a capable reader of the task and observation would do;
* :mod:`.env` -- :class:`~.env.PlantedEnv`, the :class:`~memtrials.envs.base.Env`;
* :mod:`.splits` -- its task table (``train`` / ``practice`` / ``test``, three task types).
"""
