"""What every authored AppWorld task family shares: logging in, looking up the supervisor's
user row, datetimes, word lists, the ``evaluate(...)`` code blocks (AppWorld unit tests), and
the two kinds of task: a :func:`question` (an answer, nothing changed) and a :func:`chore`
(a change, no answer).

A family is a function ``family(rng) -> dict`` returning the fields of
:class:`memtrials.envs.appworld.tasks.TaskSpec` other than id, split and family:
``apps``, ``difficulty``, ``answer`` (``None`` for a task that expects no answer),
``setup(models, ctx)`` (writes the task's world into the DBs), ``instruction``,
``solution`` (straight-line code the gold agent runs) and ``checks`` (unit tests run by
AppWorld's evaluator after :data:`EVAL_HEAD`), optionally ``public`` (data the checks read).
"""

from __future__ import annotations

from typing import Any, Callable

from memtrials.envs.appworld.cast import SUPERVISOR

TAGS = ["work", "recipes", "travel", "ideas", "books", "health", "finance", "garden"]
WORDS = ["atlas", "birch", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "iris", "juniper",
         "kestrel", "lagoon", "maple", "nectar", "onyx", "prairie", "quartz", "raven", "sierra", "tundra"]


def login(app: str) -> str:
    """Solution lines that log the supervisor into ``app`` (``token`` holds the access token)."""
    username = SUPERVISOR["phone_number"] if app == "phone" else SUPERVISOR["email"]
    return (f"passwords = {{p['account_name']: p['password'] for p in apis.supervisor.show_account_passwords()}}\n"
            f"token = apis.{app}.login(username='{username}', password=passwords['{app}'])['access_token']\n")


def user(models: Any, app: str, email: str = SUPERVISOR["email"]) -> Any:
    """The user row of ``email`` in ``app`` (phone users are keyed by phone number)."""
    if app == "phone":
        from memtrials.envs.appworld.cast import FRIENDS

        phone = next(p["phone_number"] for p in [SUPERVISOR, *FRIENDS] if p["email"] == email)
        return models[app].User.find_one(phone_number=phone)
    return models[app].User.find_one(email=email)


def dt(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


def paged(call: str, var: str, limit: int = 20) -> str:
    """Solution lines collecting every page of ``apis.<call>(..., page_index=, page_limit=)`` into ``var``."""
    head, _, args = call.partition("(")
    args = args.rstrip(")")
    sep = ", " if args else ""
    return (f"{var}, page = [], 0\n"
            "while True:\n"
            f"    batch = apis.{head}({args}{sep}page_index=page, page_limit={limit})\n"
            "    if not batch:\n"
            "        break\n"
            f"    {var} += batch\n"
            "    page += 1\n")


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


def unchanged(model: str) -> str:
    """A unit test: no record of ``model`` (``app.Model``) was added, updated or removed."""
    return f"""
with test("no {model} record is changed"):
    added, updated, removed = models.changed_records("{model}")
    test.case(len(added) + len(updated) + len(removed), "==", 0)
"""


CHANGES = {
    "one added": '    test.case(len(added), "==", 1)\n    test.case(len(updated) + len(removed), "==", 0)\n',
    "one added, none removed": '    test.case(len(added), "==", 1)\n    test.case(len(removed), "==", 0)\n',
    "one updated": '    test.case(len(added) + len(removed), "==", 0)\n    test.case(len(updated), "==", 1)\n',
    "n_deleted removed": ('    test.case(len(added) + len(updated), "==", 0)\n'
                          '    test.case(len(removed), "==", public_data.n_deleted)\n'),
}
"""What a unit test of :func:`changed` first checks of the records a task added, updated and
removed (``n_deleted``: the count ``public`` holds)."""


def changed(model: str, change: str, requirement: str) -> str:
    """The start of a unit test on the records of ``model`` (``app.Model``) that the task
    added, updated and removed: ``requirement``, then the counts of ``change`` (a key of
    :data:`CHANGES`); the task's own ``test.case`` lines follow it."""
    return (f'\nwith test("{requirement}"):\n'
            f'    added, updated, removed = models.changed_records("{model}")\n' + CHANGES[change])


def question(app: str, difficulty: int, answer: Any, setup: Callable[[Any, dict], None], instruction: str,
             steps: str, reply: str, keeps: str) -> dict:
    """A family's fields for a task that asks for ``answer`` and must change nothing: the
    solution logs into ``app``, runs ``steps`` and completes the task with ``answer=<reply>``;
    the checks compare the answer and test that no ``keeps`` record (``app.Model``) changed."""
    return dict(apps=(app,), difficulty=difficulty, answer=answer, setup=setup, instruction=instruction,
                solution=login(app) + steps + f"apis.supervisor.complete_task(answer={reply})\n",
                checks=EVAL_ANSWER + unchanged(keeps))


def chore(app: str, difficulty: int, setup: Callable[[Any, dict], None], public: dict, instruction: str,
          steps: str, checks: str) -> dict:
    """A family's fields for a task that asks for a change and no answer: the solution logs
    into ``app``, runs ``steps`` and completes the task without an answer; the checks test
    that none was given, then run ``checks`` (unit tests reading ``public``)."""
    return dict(apps=(app,), difficulty=difficulty, answer=None, setup=setup, public=public, instruction=instruction,
                solution=login(app) + steps + "apis.supervisor.complete_task()\n",
                checks=EVAL_NO_ANSWER + checks)
