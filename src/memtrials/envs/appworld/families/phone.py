"""Phone task families (contacts and alarms).

======================  ========  ====  =======================================================
family                  answer    diff  instruction (variant values drawn from the seed)
======================  ========  ====  =======================================================
phone_contact_count     number    1     how many contacts have relationship R
phone_add_contact       none      1     add contact F L with phone number N, email E, as R
phone_earliest_alarm    text      2     time of my earliest enabled alarm
phone_alarm_create      none      1     create an alarm at HH:MM labelled L
phone_alarm_disable     none      2     turn off the alarm labelled L, change nothing else
======================  ========  ====  =======================================================
"""

from __future__ import annotations

import random
from typing import Any, Callable

from memtrials.envs.appworld.families.common import WORDS, changed, chore, dt, paged, question, user

FIRST = ["Maya", "Jonas", "Priya", "Omar", "Elena", "Kenji", "Sofia", "Liam", "Amara", "Diego", "Nora", "Felix"]
LAST = ["Silva", "Novak", "Haddad", "Kim", "Rossi", "Berg", "Mensah", "Costa", "Ivanova", "Walsh", "Tanaka", "Duarte"]
RELATIONS = ["coworker", "neighbor", "cousin", "friend", "classmate"]
LABELS = ["Gym", "Work", "Medicine", "Standup", "Yoga", "School run", "Laundry", "Call mom"]


def _contacts(rng: random.Random, n: int) -> list[dict]:
    firsts, lasts = rng.sample(FIRST, n), rng.sample(LAST, n)
    return [{"first_name": f, "last_name": la, "email": f"{f.lower()}.{la.lower()}@gmail.com",
             "phone_number": f"3475550{100 + i * 7:03d}", "relationships": rng.sample(RELATIONS, rng.randint(1, 2))}
            for i, (f, la) in enumerate(zip(firsts, lasts))]


def _contact_setup(contacts: list[dict]) -> Callable[[Any, dict], None]:
    def setup(models: Any, ctx: dict) -> None:
        me = user(models, "phone")
        for i, c in enumerate(contacts):
            models.phone.Contact.create_save(user_id=me.id, created_at=dt(f"2023-04-{1 + i:02d}T09:00:00"), **c)
    return setup


def _alarms(rng: random.Random, n: int) -> list[dict]:
    times = sorted(rng.sample(range(5 * 60, 22 * 60, 5), n))
    rng.shuffle(times)
    labels = rng.sample(LABELS, n)
    return [{"time": f"{t // 60:02d}:{t % 60:02d}", "label": lab, "enabled": rng.random() < 0.6,
             "repeat_days": sorted(rng.sample(["monday", "tuesday", "wednesday", "thursday", "friday"], 2)),
             "snooze_minutes": rng.choice([5, 10, 15]), "vibration": True} for t, lab in zip(times, labels)]


def _alarm_setup(alarms: list[dict]) -> Callable[[Any, dict], None]:
    def setup(models: Any, ctx: dict) -> None:
        me = user(models, "phone")
        for i, a in enumerate(alarms):
            models.phone.Alarm.create_save(user_id=me.id, created_at=dt(f"2023-05-{2 + i:02d}T21:00:00"), **a)
    return setup


def phone_contact_count(rng: random.Random) -> dict:
    contacts = _contacts(rng, rng.randint(5, 9))
    rel = rng.choice(sorted({r for c in contacts for r in c["relationships"]}))
    answer = sum(rel in c["relationships"] for c in contacts)
    return question("phone", 1, answer=answer, setup=_contact_setup(contacts),
                    instruction=f"How many people in my phone's contact book are listed with the relationship '{rel}'?",
                    steps=paged(f"phone.search_contacts(relationship={rel!r}, access_token=token)", "contacts"),
                    reply="len(contacts)", keeps="phone.Contact")


def phone_add_contact(rng: random.Random) -> dict:
    contacts = _contacts(rng, 5)
    new = contacts.pop()  # a name and email not in the contact book
    new["phone_number"] = f"6465550{rng.randint(100, 999)}"
    rel = rng.choice(RELATIONS)
    return chore("phone", 1, setup=_contact_setup(contacts),
                 public={"first_name": new["first_name"], "last_name": new["last_name"],
                         "phone_number": new["phone_number"], "email": new["email"], "relationship": rel},
                 instruction=f"Add {new['first_name']} {new['last_name']} to my phone's contacts with the phone number "
                             f"{new['phone_number']}, the email {new['email']} and the relationship '{rel}'.",
                 steps=f"apis.phone.add_contact(first_name={new['first_name']!r}, last_name={new['last_name']!r}, "
                       f"phone_number={new['phone_number']!r}, email={new['email']!r}, relationships=[{rel!r}], "
                       "access_token=token)\n",
                 checks=changed("phone.Contact", "one added",
                                "exactly one contact is added, with the requested name, number and relationship, "
                                "and none changed")
                 + """\
    test.case(added[0].first_name, "==", public_data.first_name)
    test.case(added[0].last_name, "==", public_data.last_name)
    test.case(added[0].phone_number.replace("-", "").replace(" ", ""), "==", public_data.phone_number)
    test.case(added[0].email, "==", public_data.email)
    test.case(public_data.relationship in [r.lower() for r in added[0].relationships], "==", True)
""")


def phone_earliest_alarm(rng: random.Random) -> dict:
    while True:
        alarms = _alarms(rng, rng.randint(4, 7))
        if any(a["enabled"] for a in alarms) and not all(a["enabled"] for a in alarms):
            break
    answer = min(a["time"] for a in alarms if a["enabled"])
    return question("phone", 2, answer=answer, setup=_alarm_setup(alarms),
                    instruction="At what time does my earliest enabled phone alarm ring? Answer in HH:MM format.",
                    steps=paged("phone.show_alarms(access_token=token)", "alarms"),
                    reply="min(a['time'] for a in alarms if a['enabled'])", keeps="phone.Alarm")


def phone_alarm_create(rng: random.Random) -> dict:
    alarms = _alarms(rng, 3)
    taken = {a["time"] for a in alarms}
    t = rng.choice([m for m in range(5 * 60, 11 * 60, 15) if f"{m // 60:02d}:{m % 60:02d}" not in taken])
    time = f"{t // 60:02d}:{t % 60:02d}"
    label = f"{rng.choice(WORDS).title()} {rng.choice(['walk', 'run', 'train', 'call'])}"
    return chore("phone", 1, setup=_alarm_setup(alarms), public={"time": time, "label": label},
                 instruction=f"Set a new phone alarm for {time} with the label '{label}'.",
                 steps=f"apis.phone.create_alarm(time={time!r}, label={label!r}, access_token=token)\n",
                 checks=changed("phone.Alarm", "one added",
                                "exactly one alarm is added, enabled, at the requested time with the requested label")
                 + """\
    test.case(added[0].time, "==", public_data.time)
    test.case(added[0].label, "==", public_data.label)
    test.case(added[0].enabled, "==", True)
""")


def phone_alarm_disable(rng: random.Random) -> dict:
    alarms = _alarms(rng, rng.randint(4, 6))
    target = rng.choice(alarms)
    target["enabled"] = True
    return chore("phone", 2, setup=_alarm_setup(alarms), public={"label": target["label"], "time": target["time"]},
                 instruction=f"Turn off my phone alarm labelled '{target['label']}' without deleting it or changing "
                             "anything else.",
                 steps=paged("phone.show_alarms(access_token=token)", "alarms")
                 + f"aid = [a for a in alarms if a['label'] == {target['label']!r}][0]['alarm_id']\n"
                   "apis.phone.update_alarm(alarm_id=aid, enabled=False, access_token=token)\n",
                 checks=changed("phone.Alarm", "one updated",
                                "only the labelled alarm is updated: it is disabled and keeps its time")
                 + """\
    test.case(updated[0].label, "==", public_data.label)
    test.case(updated[0].enabled, "==", False)
    test.case(updated[0].time, "==", public_data.time)
""")


FAMILIES: dict[str, Callable[[random.Random], dict]] = {
    "phone_contact_count": phone_contact_count, "phone_add_contact": phone_add_contact,
    "phone_earliest_alarm": phone_earliest_alarm, "phone_alarm_create": phone_alarm_create,
    "phone_alarm_disable": phone_alarm_disable,
}
