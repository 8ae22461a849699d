"""Simple Note task families (moved verbatim from ``appworld_tasks``, plus ``note_append``).

====================  ========  ====  =========================================================
family                answer    diff  instruction (variant values drawn from the seed)
====================  ========  ====  =========================================================
note_tag_count        number    1     how many notes are tagged T
note_latest_title     text      2     title of the most recently created note
note_create           none      1     create a note titled X with content Y
note_delete_tag       none      2     delete every note tagged T
note_append           none      2     add line L at the end of the note titled X
====================  ========  ====  =========================================================
"""

from __future__ import annotations

import random
from typing import Any, Callable

from memtrials.envs.appworld.families.common import (TAGS, WORDS, changed, chore, dt as _dt, paged, question,
                                                     user as _user)


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


ALL_NOTES = paged("simple_note.search_notes(access_token=token)", "notes")


def note_tag_count(rng: random.Random) -> dict:
    notes = _notes(rng, rng.randint(5, 9), rng.sample(TAGS, 4))
    tag = rng.choice(sorted({t for n in notes for t in n["tags"]}))
    answer = sum(tag in n["tags"] for n in notes)
    return question("simple_note", 1, answer=answer, setup=_note_setup(notes),
                    instruction=f"How many of my Simple Note notes are tagged '{tag}'?",
                    steps=ALL_NOTES, reply=f"sum('{tag}' in n['tags'] for n in notes)", keeps="simple_note.Note")


def note_latest_title(rng: random.Random) -> dict:
    notes = _notes(rng, rng.randint(4, 7), rng.sample(TAGS, 3))
    rng.shuffle(notes)
    answer = max(notes, key=lambda n: n["created_at"])["title"]
    return question("simple_note", 2, answer=answer, setup=_note_setup(notes),
                    instruction="What is the title of my most recently created Simple Note note?",
                    steps=ALL_NOTES
                    + "ids = [n['note_id'] for n in notes]\n"
                      "full = [apis.simple_note.show_note(note_id=i, access_token=token) for i in ids]\n",
                    reply="max(full, key=lambda n: n['created_at'])['title']", keeps="simple_note.Note")


def note_create(rng: random.Random) -> dict:
    notes = _notes(rng, 3, rng.sample(TAGS, 3))
    title = f"{rng.choice(WORDS).title()} plan"
    content = f"Buy {rng.choice(WORDS)} and {rng.choice(WORDS)} before Friday."
    return chore("simple_note", 1, setup=_note_setup(notes), public={"title": title, "content": content},
                 instruction=f"Create a Simple Note note titled '{title}' with the content '{content}'.",
                 steps=f"apis.simple_note.create_note(title={title!r}, content={content!r}, access_token=token)\n",
                 checks=changed("simple_note.Note", "one added",
                                "exactly one note is added, with the requested title and content, "
                                "and none changed or removed")
                 + """\
    test.case(added[0].title, "==", public_data.title)
    test.case(added[0].content.strip(), "==", public_data.content)
""")


def note_delete_tag(rng: random.Random) -> dict:
    notes = _notes(rng, rng.randint(5, 8), rng.sample(TAGS, 3))
    tag = rng.choice(sorted({t for n in notes for t in n["tags"]}))
    keep = [n["title"] for n in notes if tag not in n["tags"]]
    return chore("simple_note", 2, setup=_note_setup(notes),
                 public={"tag": tag, "n_deleted": len(notes) - len(keep)},
                 instruction=f"Delete all my Simple Note notes that are tagged '{tag}'.",
                 steps=ALL_NOTES
                 + f"for n in notes:\n    if '{tag}' in n['tags']:\n"
                   "        apis.simple_note.delete_note(note_id=n['note_id'], access_token=token)\n",
                 checks=changed("simple_note.Note", "n_deleted removed",
                                "exactly the notes with the tag are deleted and no other note is changed")
                 + """\
    test.case(all(public_data.tag in n.tags for n in removed), "==", True)
""")


def note_append(rng: random.Random) -> dict:
    notes = _notes(rng, rng.randint(4, 7), rng.sample(TAGS, 3))
    target = rng.choice(notes)
    line = f"Remember the {rng.choice(WORDS)} {rng.choice(['tickets', 'keys', 'charger', 'umbrella', 'receipts'])}."
    return chore("simple_note", 2, setup=_note_setup(notes),
                 public={"title": target["title"], "content": target["content"] + "\n" + line},
                 instruction=f"Add the line '{line}' at the end of my Simple Note note titled '{target['title']}', "
                             "on a new line, keeping the rest of the note as it is.",
                 steps=ALL_NOTES
                 + f"nid = [n for n in notes if n['title'] == {target['title']!r}][0]['note_id']\n"
                   "note = apis.simple_note.show_note(note_id=nid, access_token=token)\n"
                   f"apis.simple_note.update_note(note_id=nid, content=note['content'] + '\\n' + {line!r}, "
                   "access_token=token)\n",
                 checks=changed("simple_note.Note", "one updated",
                                "only the named note is updated, and its content is the old content plus the new line")
                 + """\
    test.case(updated[0].title, "==", public_data.title)
    test.case(updated[0].content.strip(), "==", public_data.content)
""")


FAMILIES: dict[str, Callable[[random.Random], dict]] = {
    "note_tag_count": note_tag_count, "note_latest_title": note_latest_title, "note_create": note_create,
    "note_delete_tag": note_delete_tag, "note_append": note_append,
}
