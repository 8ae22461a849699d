"""Venmo and Splitwise task families (the first four moved verbatim from ``appworld_tasks``).

====================  ========  ====  =========================================================
family                answer    diff  instruction (variant values drawn from the seed)
====================  ========  ====  =========================================================
venmo_balance         number    1     current Venmo balance
venmo_pay             none      2     send $A to friend F with note D
venmo_received        number    2     total received on Venmo from friend F
split_group_count     number    1     how many Splitwise groups am I in
split_create_group    none      3     create group N with friends F1, F2
split_group_size      number    2     how many members group N has, me included
====================  ========  ====  =========================================================
"""

from __future__ import annotations

import random
from typing import Any, Callable

from memtrials.envs.appworld.cast import FRIENDS
from memtrials.envs.appworld.families.common import WORDS, changed, chore, dt as _dt, paged, question, user as _user


def venmo_balance(rng: random.Random) -> dict:
    balance = round(rng.uniform(20, 400), 2)

    def setup(models: Any, ctx: dict) -> None:
        user = _user(models, "venmo")
        user.venmo_balance = balance
        user.save()
    return question("venmo", 1, answer=balance, setup=setup,
                    instruction="What is my current Venmo balance (in dollars)?",
                    steps="", reply="apis.venmo.show_venmo_balance(access_token=token)['venmo_balance']",
                    keeps="venmo.Transaction")


def venmo_pay(rng: random.Random) -> dict:
    friend = rng.choice(FRIENDS)
    amount = float(rng.randint(5, 60))
    note = f"{rng.choice(['Pizza', 'Tickets', 'Groceries', 'Taxi', 'Books'])} share"
    return chore("venmo", 2, setup=lambda models, ctx: None,
                 public={"email": friend["email"], "amount": amount, "description": note},
                 instruction=f"Send ${amount:.0f} to {friend['first_name']} {friend['last_name']} on Venmo "
                             f"with the description '{note}'.",
                 steps=f"apis.venmo.create_transaction(receiver_email={friend['email']!r}, amount={amount}, "
                       f"description={note!r}, access_token=token)\n",
                 checks=changed("venmo.Transaction", "one added",
                                "exactly one transaction is made, to the friend, with the amount and description asked")
                 + """\
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
    return question("splitwise", 1, answer=answer, setup=_group_setup(groups),
                    instruction="How many Splitwise groups am I a member of?",
                    steps=paged("splitwise.show_groups(access_token=token)", "groups"),
                    reply="len(groups)", keeps="splitwise.Group")


def split_create_group(rng: random.Random) -> dict:
    name = f"{rng.choice(WORDS).title()} weekend"
    members = rng.sample(FRIENDS, 2)
    emails = [m["email"] for m in members]
    return chore("splitwise", 3, setup=_group_setup([("Old flat", True)]),
                 public={"name": name, "emails": sorted(emails)},
                 instruction=f"Create a Splitwise group named '{name}' with {members[0]['first_name']} "
                             f"{members[0]['last_name']} and {members[1]['first_name']} {members[1]['last_name']}.",
                 steps=f"apis.splitwise.create_group(name={name!r}, member_emails={emails!r}, access_token=token)\n",
                 checks=changed("splitwise.Group", "one added, none removed",
                                "exactly one group is added, with the requested name")
                 + """\
    test.case(added[0].name, "==", public_data.name)
with test("the new group has the two friends and the supervisor as members"):
    group = models.end.splitwise.Group.find_one(name=public_data.name)
    emails = sorted(m.user.email for m in models.end.splitwise.GroupMember.find_all(group_id=group.id))
    test.case(emails, "==", sorted(public_data.emails + [main_user.email]))
""")


def venmo_received(rng: random.Random) -> dict:
    friend = rng.choice(FRIENDS)
    txs = []  # (sender email or "me", receiver email or "me", amount, day, description)
    for i in range(rng.randint(5, 9)):
        other = rng.choice(FRIENDS)["email"]
        pair = (other, "me") if rng.random() < 0.6 else ("me", other)
        txs.append((*pair, float(rng.randint(4, 80)), 3 + i, f"{rng.choice(WORDS).title()} night"))
    if not any(s == friend["email"] for s, *_ in txs):
        txs.append((friend["email"], "me", float(rng.randint(4, 80)), 14, "Concert tickets"))
    answer = round(sum(t[2] for t in txs if t[0] == friend["email"]), 2)

    def setup(models: Any, ctx: dict) -> None:
        me = _user(models, "venmo")
        for s, r, a, day, text in txs:
            sender = me if s == "me" else _user(models, "venmo", s)
            receiver = me if r == "me" else _user(models, "venmo", r)
            when = _dt(f"2023-05-{day:02d}T18:30:00")
            models.venmo.Transaction.create_save(sender_id=sender.id, receiver_id=receiver.id, amount=a,
                                                 description=text, private=False,
                                                 created_at=when, updated_at=when)
    return question("venmo", 2, answer=answer, setup=setup,
                    instruction=f"How much money in total (in dollars) has {friend['first_name']} "
                                f"{friend['last_name']} sent me on Venmo?",
                    steps=paged(f"venmo.show_transactions(user_email={friend['email']!r}, direction='received', "
                                "access_token=token)", "txs"),
                    reply=f"round(sum(t['amount'] for t in txs if t['sender']['email'] == {friend['email']!r}), 2)",
                    keeps="venmo.Transaction")


def split_group_size(rng: random.Random) -> dict:
    names = rng.sample(["Roommates", "Ski trip", "Book club", "Lunch crew", "Road trip", "Band", "Family"], 4)
    groups = [(n, True) for n in names]
    i = rng.randrange(len(groups))
    answer = 2 + i % 2  # _group_setup: my groups hold me and the first 1 + i % 2 friends
    return question("splitwise", 2, answer=answer, setup=_group_setup(groups),
                    instruction=f"How many members does my Splitwise group '{names[i]}' have, counting me?",
                    steps=paged("splitwise.show_groups(access_token=token)", "groups")
                    + f"gid = [g for g in groups if g['name'] == {names[i]!r}][0]['group_id']\n"
                      "group = apis.splitwise.show_group(group_id=gid, access_token=token)\n",
                    reply="len(group['members'])", keeps="splitwise.GroupMember")


FAMILIES: dict[str, Callable[[random.Random], dict]] = {
    "venmo_balance": venmo_balance, "venmo_pay": venmo_pay, "venmo_received": venmo_received,
    "split_group_count": split_group_count, "split_create_group": split_create_group,
    "split_group_size": split_group_size,
}
