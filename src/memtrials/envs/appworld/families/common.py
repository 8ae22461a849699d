"""What every authored AppWorld task family shares: logging in, looking up the supervisor's
user row, datetimes, word lists, and the ``evaluate(...)`` code blocks (AppWorld unit tests).

A family is a function ``family(rng) -> dict`` returning the fields of
:class:`memtrials.envs.appworld.tasks.TaskSpec` other than id, split and family:
``apps``, ``difficulty``, ``answer`` (``None`` for a task that expects no answer),
``setup(models, ctx)`` (writes the task's world into the DBs), ``instruction``,
``solution`` (straight-line code the gold agent runs) and ``checks`` (unit tests run by
AppWorld's evaluator after :data:`EVAL_HEAD`), optionally ``public`` (data the checks read).
"""

from __future__ import annotations

from typing import Any

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
