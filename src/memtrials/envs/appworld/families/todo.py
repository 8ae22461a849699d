"""Todoist task families (the first two moved verbatim from ``appworld_tasks``).

======================  ========  ====  =======================================================
family                  answer    diff  instruction (variant values drawn from the seed)
======================  ========  ====  =======================================================
todo_open_count         number    2     how many open tasks in project P
todo_complete           none      2     mark task X of project P complete
todo_add_task           none      1     add a task titled X to project P
todo_most_open          text      3     which project has the most open tasks
======================  ========  ====  =======================================================
"""

from __future__ import annotations

import random
from typing import Any, Callable

from memtrials.envs.appworld.families.common import WORDS, changed, chore, dt as _dt, question, user as _user


def _todo_setup(projects: dict[str, list[tuple[str, bool]]]) -> Callable[[Any, dict], None]:
    def setup(models: Any, ctx: dict) -> None:
        user = _user(models, "todoist")
        t0 = _dt("2023-05-02T08:00:00")
        for name, tasks in projects.items():
            p = models.todoist.Project.create_save(user_id=user.id, name=name, color="blue", is_inbox=False,
                                              description=f"{name} project", created_at=t0)
            models.todoist.ProjectCollaboratorLink.create_save(project_id=p.id, user_id=user.id, is_favorite=False,
                                                          is_archived=False, created_at=t0)
            for i, (title, done) in enumerate(tasks):
                models.todoist.Task.create_save(project_id=p.id, user_id=user.id, title=title, priority="medium",
                                           is_completed=done, order_index=i, created_at=t0)
    return setup


def _projects(rng: random.Random) -> dict[str, list[tuple[str, bool]]]:
    names = rng.sample(["Home", "Garden", "Thesis", "Moving", "Wedding", "Trip", "Fitness"], 3)
    return {n: [(f"{rng.choice(['Call', 'Buy', 'Fix', 'Email', 'Plan'])} {rng.choice(WORDS)}", rng.random() < 0.3)
                for _ in range(rng.randint(3, 6))] for n in names}


ALL_PROJECTS = ("projects = apis.todoist.show_projects(access_token=token, page_limit=20)\n")
ALL_TASKS = ("res = apis.todoist.show_tasks(project_id=pid, access_token=token)\n"
             "tasks = res['no_section_tasks'] + [t for s in res.get('sections', []) for t in s.get('tasks', [])]\n")


def _project_id(name: str) -> str:
    """Solution line: ``pid``, the id of project ``name`` among ``projects``."""
    return f"pid = [p for p in projects if p['name'] == {name!r}][0]['project_id']\n"


def todo_open_count(rng: random.Random) -> dict:
    projects = _projects(rng)
    name = rng.choice(sorted(projects))
    answer = sum(not done for _, done in projects[name])
    return question("todoist", 2, answer=answer, setup=_todo_setup(projects),
                    instruction=f"How many tasks in my Todoist project '{name}' are not completed yet?",
                    steps=ALL_PROJECTS + _project_id(name) + ALL_TASKS,
                    reply="sum(not t['is_completed'] for t in tasks)", keeps="todoist.Task")


def todo_complete(rng: random.Random) -> dict:
    projects = _projects(rng)
    name = rng.choice(sorted(projects))
    title = f"Renew {rng.choice(WORDS)} permit"
    projects[name].append((title, False))
    return chore("todoist", 2, setup=_todo_setup(projects), public={"title": title},
                 instruction=f"Mark the task '{title}' in my Todoist project '{name}' as completed.",
                 steps=ALL_PROJECTS + _project_id(name) + ALL_TASKS
                 + f"tid = [t for t in tasks if t['title'] == {title!r}][0]['task_id']\n"
                   "apis.todoist.update_task(task_id=tid, is_completed=True, access_token=token)\n",
                 checks=changed("todoist.Task", "one updated",
                                "only the requested task is updated, and it is now completed")
                 + """\
    test.case(updated[0].title, "==", public_data.title)
    test.case(updated[0].is_completed, "==", True)
""")



def todo_add_task(rng: random.Random) -> dict:
    projects = _projects(rng)
    name = rng.choice(sorted(projects))
    title = f"{rng.choice(['Book', 'Order', 'Return', 'Print', 'Pack'])} the {rng.choice(WORDS)} {rng.choice(['tickets', 'boxes', 'forms', 'samples'])}"
    return chore("todoist", 1, setup=_todo_setup(projects), public={"title": title, "project": name},
                 instruction=f"Add a task titled '{title}' to my Todoist project '{name}'.",
                 steps=ALL_PROJECTS + _project_id(name)
                 + f"apis.todoist.create_task(project_id=pid, title={title!r}, access_token=token)\n",
                 checks=changed("todoist.Task", "one added",
                                "exactly one task is added, with the requested title, in the requested project, "
                                "and none changed")
                 + """\
    test.case(added[0].title, "==", public_data.title)
    project = models.end.todoist.Project.find_one(id=added[0].project_id)
    test.case(project.name, "==", public_data.project)
""")


def todo_most_open(rng: random.Random) -> dict:
    while True:  # redraw until one project has strictly the most open tasks
        projects = _projects(rng)
        counts = {n: sum(not done for _, done in ts) for n, ts in projects.items()}
        best = max(counts.values())
        if list(counts.values()).count(best) == 1:
            break
    answer = max(counts, key=counts.get)
    return question("todoist", 3, answer=answer, setup=_todo_setup(projects),
                    instruction="Which of my Todoist projects has the most tasks that are not completed yet? "
                                "Answer with the project's name.",
                    steps=ALL_PROJECTS
                    + "counts = {}\n"
                      "for p in projects:\n"
                      "    pid = p['project_id']\n"
                    + "".join("    " + ln + "\n" for ln in ALL_TASKS.splitlines())
                    + "    counts[p['name']] = sum(not t['is_completed'] for t in tasks)\n",
                    reply="max(counts, key=counts.get)", keeps="todoist.Task")


FAMILIES: dict[str, Callable[[random.Random], dict]] = {
    "todo_open_count": todo_open_count, "todo_complete": todo_complete, "todo_add_task": todo_add_task,
    "todo_most_open": todo_most_open,
}
