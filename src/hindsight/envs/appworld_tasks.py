"""The project-authored AppWorld task set: ten task families over four apps, three variants each.

Families (app; answer or not; difficulty):

====================  ===========  ========  =====================================================
family                app          answer    instruction (variant values drawn from the seed)
====================  ===========  ========  =====================================================
note_tag_count        simple_note  number    how many notes are tagged T
note_latest_title     simple_note  text      title of the most recently created note
note_create           simple_note  none      create a note titled X with content Y
note_delete_tag       simple_note  none      delete every note tagged T
todo_open_count       todoist      number    how many open tasks in project P
todo_complete         todoist      none      mark task X of project P complete
venmo_balance         venmo        number    current Venmo balance
venmo_pay             venmo        none      send $A to friend F with note D
split_group_count     splitwise    number    how many Splitwise groups am I in
split_create_group    splitwise    none      create group N with friends F1, F2
====================  ===========  ========  =====================================================

Variant 1 of every family is in ``train``, variant 2 in ``practice``, variant 3 in ``eval``
(30 tasks, 10 per split, half expecting an answer).  Each task has an ``evaluation.py``
run by AppWorld's own evaluator with one unit test per requirement (task completed,
answer matches / no answer given, the intended records changed, nothing else changed),
and a straight-line solution (``solution.py``) that the gold agent executes.
"""

from __future__ import annotations

import json
import random
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable

from hindsight.envs.appworld_cast import FRIENDS, PASSWORDS, SUPERVISOR, TASK_DATETIME

SPLIT_OF_VARIANT = {0: "train", 1: "practice", 2: "eval"}
TAGS = ["work", "recipes", "travel", "ideas", "books", "health", "finance", "garden"]
WORDS = ["atlas", "birch", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "iris", "juniper",
         "kestrel", "lagoon", "maple", "nectar", "onyx", "prairie", "quartz", "raven", "sierra", "tundra"]


@dataclass
class TaskSpec:
    """One authored task: what the world holds, what is asked, how it is checked and solved."""

    task_id: str
    split: str
    family: str
    apps: tuple[str, ...]
    difficulty: int
    instruction: str
    answer: Any
    setup: Callable[[Any, dict], None]
    solution: str
    checks: str
    public: dict = field(default_factory=dict)


def _login(app: str) -> str:
    return (f"passwords = {{p['account_name']: p['password'] for p in apis.supervisor.show_account_passwords()}}\n"
            f"token = apis.{app}.login(username='{SUPERVISOR['email']}', password=passwords['{app}'])['access_token']\n")


def _user(models: Any, app: str, email: str = SUPERVISOR["email"]) -> Any:
    return models[app].User.find_one(email=email)


def _dt(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


# -- evaluation code blocks (inside ``def evaluate(...)``) --------------------------------
EVAL_HEAD = """
import json
task = models.end.supervisor.Task.all()[0]
predicted = json.loads(task.answer) if task.answer else None
with test("the task is marked complete with status success"):
    test.case(task.status, "==", "success")
"""
EVAL_ANSWER = """
with test("the answer matches the ground truth"):
    test.answer(predicted, ground_truth_answer)
"""
EVAL_NO_ANSWER = """
with test("no answer is given, since the task asks for none"):
    test.case(predicted, "==", None)
"""


def _unchanged(model: str) -> str:
    return f"""
with test("no {model} record is changed"):
    added, updated, removed = models.changed_records("{model}")
    test.case(len(added) + len(updated) + len(removed), "==", 0)
"""


def _notes(rng: random.Random, n: int, tags: list[str]) -> list[dict]:
    out = []
    firsts = rng.sample(WORDS, n)  # distinct titles (AppWorld: unique per user)
    for i in range(n):
        t = rng.sample(tags, rng.randint(1, 2))
        title = f"{firsts[i].title()} {rng.choice(WORDS)} notes"
        out.append({"title": title, "content": f"Notes about {' and '.join(t)} ({i}).", "tags": t,
                    "created_at": f"2023-05-{2 + i:02d}T0{i % 9}:15:00"})
    return out


def _note_setup(notes: list[dict]) -> Callable[[Any, dict], None]:
    def setup(models: Any, ctx: dict) -> None:
        user = _user(models, "simple_note")
        for n in notes:
            models.simple_note.Note.create_save(user_id=user.id, title=n["title"], content=n["content"], tags=n["tags"],
                                           created_at=_dt(n["created_at"]), updated_at=_dt(n["created_at"]),
                                           pinned=False)
    return setup


ALL_NOTES = (
    "notes, page = [], 0\n"
    "while True:\n"
    "    batch = apis.simple_note.search_notes(access_token=token, page_index=page, page_limit=20)\n"
    "    if not batch:\n"
    "        break\n"
    "    notes += batch\n"
    "    page += 1\n"
)


def note_tag_count(rng: random.Random) -> dict:
    notes = _notes(rng, rng.randint(5, 9), rng.sample(TAGS, 4))
    tag = rng.choice(sorted({t for n in notes for t in n["tags"]}))
    answer = sum(tag in n["tags"] for n in notes)
    return dict(apps=("simple_note",), difficulty=1, answer=answer, setup=_note_setup(notes),
                instruction=f"How many of my Simple Note notes are tagged '{tag}'?",
                solution=_login("simple_note") + ALL_NOTES
                + f"apis.supervisor.complete_task(answer=sum('{tag}' in n['tags'] for n in notes))\n",
                checks=EVAL_ANSWER + _unchanged("simple_note.Note"))


def note_latest_title(rng: random.Random) -> dict:
    notes = _notes(rng, rng.randint(4, 7), rng.sample(TAGS, 3))
    rng.shuffle(notes)
    answer = max(notes, key=lambda n: n["created_at"])["title"]
    return dict(apps=("simple_note",), difficulty=2, answer=answer, setup=_note_setup(notes),
                instruction="What is the title of my most recently created Simple Note note?",
                solution=_login("simple_note") + ALL_NOTES
                + "ids = [n['note_id'] for n in notes]\n"
                  "full = [apis.simple_note.show_note(note_id=i, access_token=token) for i in ids]\n"
                  "apis.supervisor.complete_task(answer=max(full, key=lambda n: n['created_at'])['title'])\n",
                checks=EVAL_ANSWER + _unchanged("simple_note.Note"))


def note_create(rng: random.Random) -> dict:
    notes = _notes(rng, 3, rng.sample(TAGS, 3))
    title = f"{rng.choice(WORDS).title()} plan"
    content = f"Buy {rng.choice(WORDS)} and {rng.choice(WORDS)} before Friday."
    return dict(apps=("simple_note",), difficulty=1, answer=None, setup=_note_setup(notes),
                public={"title": title, "content": content},
                instruction=f"Create a Simple Note note titled '{title}' with the content '{content}'.",
                solution=_login("simple_note")
                + f"apis.simple_note.create_note(title={title!r}, content={content!r}, access_token=token)\n"
                  "apis.supervisor.complete_task()\n",
                checks=EVAL_NO_ANSWER + """
with test("exactly one note is added, with the requested title and content, and none changed or removed"):
    added, updated, removed = models.changed_records("simple_note.Note")
    test.case(len(added), "==", 1)
    test.case(len(updated) + len(removed), "==", 0)
    test.case(added[0].title, "==", public_data.title)
    test.case(added[0].content.strip(), "==", public_data.content)
""")


def note_delete_tag(rng: random.Random) -> dict:
    notes = _notes(rng, rng.randint(5, 8), rng.sample(TAGS, 3))
    tag = rng.choice(sorted({t for n in notes for t in n["tags"]}))
    keep = [n["title"] for n in notes if tag not in n["tags"]]
    return dict(apps=("simple_note",), difficulty=2, answer=None, setup=_note_setup(notes),
                public={"tag": tag, "n_deleted": len(notes) - len(keep)},
                instruction=f"Delete all my Simple Note notes that are tagged '{tag}'.",
                solution=_login("simple_note") + ALL_NOTES
                + f"for n in notes:\n    if '{tag}' in n['tags']:\n"
                  "        apis.simple_note.delete_note(note_id=n['note_id'], access_token=token)\n"
                  "apis.supervisor.complete_task()\n",
                checks=EVAL_NO_ANSWER + """
with test("exactly the notes with the tag are deleted and no other note is changed"):
    added, updated, removed = models.changed_records("simple_note.Note")
    test.case(len(added) + len(updated), "==", 0)
    test.case(len(removed), "==", public_data.n_deleted)
    test.case(all(public_data.tag in n.tags for n in removed), "==", True)
""")


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


def todo_open_count(rng: random.Random) -> dict:
    projects = _projects(rng)
    name = rng.choice(sorted(projects))
    answer = sum(not done for _, done in projects[name])
    return dict(apps=("todoist",), difficulty=2, answer=answer, setup=_todo_setup(projects),
                instruction=f"How many tasks in my Todoist project '{name}' are not completed yet?",
                solution=_login("todoist") + ALL_PROJECTS
                + f"pid = [p for p in projects if p['name'] == {name!r}][0]['project_id']\n"
                  "res = apis.todoist.show_tasks(project_id=pid, access_token=token)\n"
                  "tasks = res['no_section_tasks'] + [t for s in res.get('sections', []) for t in s.get('tasks', [])]\n"
                  "apis.supervisor.complete_task(answer=sum(not t['is_completed'] for t in tasks))\n",
                checks=EVAL_ANSWER + _unchanged("todoist.Task"))


def todo_complete(rng: random.Random) -> dict:
    projects = _projects(rng)
    name = rng.choice(sorted(projects))
    title = f"Renew {rng.choice(WORDS)} permit"
    projects[name].append((title, False))
    return dict(apps=("todoist",), difficulty=2, answer=None, setup=_todo_setup(projects),
                public={"title": title},
                instruction=f"Mark the task '{title}' in my Todoist project '{name}' as completed.",
                solution=_login("todoist") + ALL_PROJECTS
                + f"pid = [p for p in projects if p['name'] == {name!r}][0]['project_id']\n"
                  "res = apis.todoist.show_tasks(project_id=pid, access_token=token)\n"
                  "tasks = res['no_section_tasks'] + [t for s in res.get('sections', []) for t in s.get('tasks', [])]\n"
                  f"tid = [t for t in tasks if t['title'] == {title!r}][0]['task_id']\n"
                  "apis.todoist.update_task(task_id=tid, is_completed=True, access_token=token)\n"
                  "apis.supervisor.complete_task()\n",
                checks=EVAL_NO_ANSWER + """
with test("only the requested task is updated, and it is now completed"):
    added, updated, removed = models.changed_records("todoist.Task")
    test.case(len(added) + len(removed), "==", 0)
    test.case(len(updated), "==", 1)
    test.case(updated[0].title, "==", public_data.title)
    test.case(updated[0].is_completed, "==", True)
""")


def venmo_balance(rng: random.Random) -> dict:
    balance = round(rng.uniform(20, 400), 2)

    def setup(models: Any, ctx: dict) -> None:
        user = _user(models, "venmo")
        user.venmo_balance = balance
        user.save()
    return dict(apps=("venmo",), difficulty=1, answer=balance, setup=setup,
                instruction="What is my current Venmo balance (in dollars)?",
                solution=_login("venmo")
                + "apis.supervisor.complete_task(answer=apis.venmo.show_venmo_balance(access_token=token)['venmo_balance'])\n",
                checks=EVAL_ANSWER + _unchanged("venmo.Transaction"))


def venmo_pay(rng: random.Random) -> dict:
    friend = rng.choice(FRIENDS)
    amount = float(rng.randint(5, 60))
    note = f"{rng.choice(['Pizza', 'Tickets', 'Groceries', 'Taxi', 'Books'])} share"
    return dict(apps=("venmo",), difficulty=2, answer=None, setup=lambda models, ctx: None,
                public={"email": friend["email"], "amount": amount, "description": note},
                instruction=f"Send ${amount:.0f} to {friend['first_name']} {friend['last_name']} on Venmo "
                            f"with the description '{note}'.",
                solution=_login("venmo")
                + f"apis.venmo.create_transaction(receiver_email={friend['email']!r}, amount={amount}, "
                  f"description={note!r}, access_token=token)\n"
                  "apis.supervisor.complete_task()\n",
                checks=EVAL_NO_ANSWER + """
with test("exactly one transaction is made, to the friend, with the amount and description asked"):
    added, updated, removed = models.changed_records("venmo.Transaction")
    test.case(len(added), "==", 1)
    test.case(len(updated) + len(removed), "==", 0)
    test.case(added[0].receiver.email, "==", public_data.email)
    test.case(added[0].sender.email, "==", main_user.email)
    test.case(round(added[0].amount, 2), "==", public_data.amount)
    test.case(added[0].description, "==", public_data.description)
""")


def _group_setup(groups: list[tuple[str, bool]]) -> Callable[[Any, dict], None]:
    def setup(models: Any, ctx: dict) -> None:
        me = _user(models, "splitwise")
        friends = [_user(models, "splitwise", f["email"]) for f in FRIENDS]
        t0 = _dt("2023-05-03T12:00:00")
        for i, (name, member) in enumerate(groups):
            owner = me if member else friends[i % len(friends)]
            g = models.splitwise.Group.create_save(user_id=owner.id, name=name, description="", created_at=t0,
                                              invitation_code=f"INV{i:04d}{name[:3].upper()}", deleted=False)
            members = ([me] if member else []) + [f for f in friends if f.id != me.id][: 1 + i % 2]
            for m in {m.id: m for m in members + [owner]}.values():
                models.splitwise.GroupMember.create_save(group_id=g.id, user_id=m.id, joined_at=t0)
    return setup


def split_group_count(rng: random.Random) -> dict:
    names = rng.sample(["Roommates", "Ski trip", "Book club", "Lunch crew", "Road trip", "Band", "Family"], 5)
    groups = [(n, rng.random() < 0.6) for n in names]
    answer = sum(m for _, m in groups)
    return dict(apps=("splitwise",), difficulty=1, answer=answer, setup=_group_setup(groups),
                instruction="How many Splitwise groups am I a member of?",
                solution=_login("splitwise")
                + "groups, page = [], 0\n"
                  "while True:\n"
                  "    batch = apis.splitwise.show_groups(access_token=token, page_index=page, page_limit=20)\n"
                  "    if not batch:\n        break\n"
                  "    groups += batch\n    page += 1\n"
                  "apis.supervisor.complete_task(answer=len(groups))\n",
                checks=EVAL_ANSWER + _unchanged("splitwise.Group"))


def split_create_group(rng: random.Random) -> dict:
    name = f"{rng.choice(WORDS).title()} weekend"
    members = rng.sample(FRIENDS, 2)
    emails = [m["email"] for m in members]
    return dict(apps=("splitwise",), difficulty=3, answer=None, setup=_group_setup([("Old flat", True)]),
                public={"name": name, "emails": sorted(emails)},
                instruction=f"Create a Splitwise group named '{name}' with {members[0]['first_name']} "
                            f"{members[0]['last_name']} and {members[1]['first_name']} {members[1]['last_name']}.",
                solution=_login("splitwise")
                + f"apis.splitwise.create_group(name={name!r}, member_emails={emails!r}, access_token=token)\n"
                  "apis.supervisor.complete_task()\n",
                checks=EVAL_NO_ANSWER + """
with test("exactly one group is added, with the requested name"):
    added, updated, removed = models.changed_records("splitwise.Group")
    test.case(len(added), "==", 1)
    test.case(len(removed), "==", 0)
    test.case(added[0].name, "==", public_data.name)
with test("the new group has the two friends and the supervisor as members"):
    group = models.end.splitwise.Group.find_one(name=public_data.name)
    emails = sorted(m.user.email for m in models.end.splitwise.GroupMember.find_all(group_id=group.id))
    test.case(emails, "==", sorted(public_data.emails + [main_user.email]))
""")


FAMILIES: dict[str, Callable[[random.Random], dict]] = {
    "note_tag_count": note_tag_count, "note_latest_title": note_latest_title, "note_create": note_create,
    "note_delete_tag": note_delete_tag, "todo_open_count": todo_open_count, "todo_complete": todo_complete,
    "venmo_balance": venmo_balance, "venmo_pay": venmo_pay, "split_group_count": split_group_count,
    "split_create_group": split_create_group,
}


def task_specs(seed: int = 0, variants: int = 3) -> list[TaskSpec]:
    """All authored tasks, deterministic in ``seed``; ids ``hs<family>_<variant>`` (AppWorld's id form)."""
    specs = []
    for family, make in FAMILIES.items():
        for v in range(variants):
            rng = random.Random(f"{seed}-{family}-{v}")
            d = make(rng)
            specs.append(TaskSpec(task_id=f"hs{family.replace('_', '')}_{v + 1}", split=SPLIT_OF_VARIANT[v % 3],
                                  family=family, **d))
    return specs


def evaluation_code(spec: TaskSpec) -> str:
    body = textwrap.indent((EVAL_HEAD + spec.checks).strip("\n"), "    ")
    return ("def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):\n"
            + body + "\n")


def solution_code(spec: TaskSpec) -> str:
    return "def solution(apis, requester):\n" + textwrap.indent(spec.solution, "    ")


def save_task(spec: TaskSpec) -> None:
    """Write one task with AppWorld's own ``Task.save`` (DBs as changes against base_dbs)."""
    from appworld.apps import get_all_apps
    from appworld.apps.admin.models import MainUserMunch
    from appworld.collections.models import ModelCollection
    from appworld.common.constants import DB_VERSION
    from appworld.common.path_store import path_store
    from appworld.ground_truth import GroundTruth
    from appworld.task import Task

    import os

    apps = get_all_apps(skip_admin=True)
    models = ModelCollection.load(from_db_home_path=os.path.join(path_store.data, "base_dbs"),
                                  to_db_home_path=f":memory:hindsight-task-{spec.task_id}",
                                  load_apps=[*apps, "admin"])
    sup = models.supervisor
    s = sup.Supervisor.create_save(**SUPERVISOR)
    for app, password in PASSWORDS.items():
        sup.AccountPassword.create_save(supervisor_id=s.id, account_name=app, password=password)
    sup.Task.create_save(supervisor_id=s.id, instruction=spec.instruction, status=None, answer="null")
    spec.setup(models, {})
    task = Task(id=spec.task_id, instruction=spec.instruction, supervisor=MainUserMunch(**SUPERVISOR),
                datetime=_dt(TASK_DATETIME), allowed_apps=apps, db_version=DB_VERSION, model_collection=models)
    solution = solution_code(spec)
    task.ground_truth = GroundTruth(
        task_id=spec.task_id, required_apps=list(spec.apps), public_data=spec.public, private_data={},
        answer=spec.answer, evaluation_code=evaluation_code(spec), solution_code=solution,
        compiled_solution_code=solution, generator_code="", test_data=None,
        # num_solution_code_lines given: AppWorld would otherwise count them with black (not installed)
        metadata={"difficulty": spec.difficulty, "num_solution_code_lines": len(spec.solution.splitlines()),
                  "mode": "full",
                  "family": spec.family, "split": spec.split,
                  "source": "hindsight.envs.appworld_tasks", "instruction": json.dumps(spec.instruction)},
    )
    import appworld.ground_truth as gt_module

    # GroundTruth.save ends by formatting the folder with ruff (not a dependency here);
    # the code we write is already formatted, so that step is skipped.
    run_ruff, gt_module.run_ruff = gt_module.run_ruff, lambda *a, **k: None
    try:
        task.save(delete_if_exists=True, save_ground_truth=True, ground_truth_mode="full",
                  model_collection_format="changes")
    finally:
        gt_module.run_ruff = run_ruff
    task.close()
