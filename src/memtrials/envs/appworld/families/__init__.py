"""The families of the project-authored AppWorld task set, one module per app (or pair of apps);
:mod:`memtrials.envs.appworld.tasks` assigns them to splits and saves the tasks."""
