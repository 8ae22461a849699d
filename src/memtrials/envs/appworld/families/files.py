"""File System task families (files under the supervisor's home directory ``~/`` = ``/home/ada/``).

======================  ========  ====  =======================================================
family                  answer    diff  instruction (variant values drawn from the seed)
======================  ========  ====  =======================================================
fs_count_ext            number    1     how many .E files under ~/D (recursively)
fs_sum_csv              number    2     total of the amount column in ~/documents/budget/M.csv
fs_create_file          none      1     create the file ~/P with content C
fs_delete_ext           none      2     delete every .tmp file under ~/downloads
fs_move_file            none      2     move file ~/downloads/F into ~/documents/D/
======================  ========  ====  =======================================================
"""

from __future__ import annotations

import random
from typing import Any, Callable

from memtrials.envs.appworld.cast import SUPERVISOR
from memtrials.envs.appworld.families.common import WORDS, changed, chore, dt, question, user

HOME = f"/home/{SUPERVISOR['first_name'].lower()}/"
FOLDERS = ["documents/", "documents/work/", "documents/travel/", "downloads/", "photos/", "music/"]
EXTS = ["txt", "md", "csv", "log", "json"]
MONTHS = ["january", "february", "march", "april"]


def _tree(rng: random.Random, n: int) -> dict[str, str]:
    """``n`` files (home-relative path -> content) with distinct names spread over :data:`FOLDERS`."""
    names = rng.sample([f"{a}_{b}" for a in WORDS for b in ("draft", "list", "report", "notes")], n)
    return {f"{rng.choice(FOLDERS)}{name}.{rng.choice(EXTS)}": f"{name.replace('_', ' ')} v{rng.randint(1, 9)}"
            for name in names}


def _fs_setup(files: dict[str, str]) -> Callable[[Any, dict], None]:
    def setup(models: Any, ctx: dict) -> None:
        me = user(models, "file_system")
        when = dt("2023-05-04T10:00:00")
        dirs = {"/", "/home/", HOME} | {HOME + f for f in FOLDERS}
        for rel in files:
            parts = rel.split("/")[:-1]
            dirs |= {HOME + "/".join(parts[: k + 1]) + "/" for k in range(len(parts))}
        for d in sorted(dirs):
            models.file_system.Directory.create_save(path=d, user_id=me.id, created_at=when, updated_at=when)
        for rel, content in files.items():
            models.file_system.File.create_save(path=HOME + rel, user_id=me.id, content=content, created_at=when,
                                                updated_at=when)
    return setup


def fs_count_ext(rng: random.Random) -> dict:
    files = _tree(rng, rng.randint(8, 14))
    folder = rng.choice(["documents/", "downloads/"])
    files[f"{folder}{rng.choice(WORDS)}_index.{rng.choice(EXTS)}"] = "index"  # the folder holds at least one file
    ext = rng.choice(sorted({p.rsplit(".", 1)[1] for p in files if p.startswith(folder)}))
    answer = sum(p.startswith(folder) and p.endswith("." + ext) for p in files)
    return question("file_system", 1, answer=answer, setup=_fs_setup(files),
                    instruction=f"How many .{ext} files are there in my ~/{folder} directory, counting its "
                                "sub-directories too?",
                    steps=f"paths = apis.file_system.show_directory(directory_path='~/{folder}', entry_type='files', "
                          "recursive=True, access_token=token)\n",
                    reply=f"sum(p.endswith('.{ext}') for p in paths)", keeps="file_system.File")


def fs_sum_csv(rng: random.Random) -> dict:
    files = _tree(rng, rng.randint(4, 8))
    month = rng.choice(MONTHS)
    items = rng.sample(["rent", "food", "power", "water", "phone", "bus", "gym", "books", "gifts"], rng.randint(4, 7))
    amounts = [rng.randint(5, 400) for _ in items]
    for m in MONTHS:  # every month has a budget file; the others are distractors
        rows = zip(items, amounts) if m == month else ((i, rng.randint(5, 400)) for i in items)
        files[f"documents/budget/{m}.csv"] = "item,amount\n" + "".join(f"{i},{a}\n" for i, a in rows)
    return question("file_system", 2, answer=sum(amounts), setup=_fs_setup(files),
                    instruction=f"What is the total of the amount column in my budget file "
                                f"~/documents/budget/{month}.csv?",
                    steps=f"text = apis.file_system.show_file(file_path='~/documents/budget/{month}.csv', "
                          "access_token=token)['content']\n"
                          "rows = [line.split(',') for line in text.strip().splitlines()[1:]]\n",
                    reply="sum(int(r[1]) for r in rows)", keeps="file_system.File")


def fs_create_file(rng: random.Random) -> dict:
    files = _tree(rng, rng.randint(4, 8))
    rel = f"documents/{rng.choice(['work', 'travel'])}/{rng.choice(WORDS)}_{rng.choice(['plan', 'todo', 'ideas'])}.txt"
    content = f"Pack the {rng.choice(WORDS)} bag and call {rng.choice(['Ravi', 'Lena', 'Tom'])}."
    return chore("file_system", 1, setup=_fs_setup(files), public={"path": HOME + rel, "content": content},
                 instruction=f"Create a file at ~/{rel} containing exactly: {content}",
                 steps=f"apis.file_system.create_file(file_path='~/{rel}', content={content!r}, access_token=token)\n",
                 checks=changed("file_system.File", "one added",
                                "exactly one file is added, at the requested path with the requested content, "
                                "and none changed")
                 + """\
    test.case(added[0].path, "==", public_data.path)
    test.case(added[0].content.strip(), "==", public_data.content)
""")


def fs_delete_ext(rng: random.Random) -> dict:
    files = _tree(rng, rng.randint(6, 10))
    junk = rng.sample([f"{w}_{k}" for w in WORDS for k in ("cache", "partial", "swap")], rng.randint(2, 4))
    for name in junk:
        files[f"downloads/{rng.choice(['', 'old/'])}{name}.tmp"] = "temporary"
    files[f"documents/{rng.choice(WORDS)}_keep.txt"] = "not temporary"
    n_tmp = sum(p.endswith(".tmp") for p in files)
    return chore("file_system", 2, setup=_fs_setup(files), public={"n_deleted": n_tmp},
                 instruction="Delete every .tmp file in my ~/downloads/ directory, including its sub-directories. "
                             "Leave all other files alone.",
                 steps="paths = apis.file_system.show_directory(directory_path='~/downloads/', entry_type='files', "
                       "recursive=True, access_token=token)\n"
                       "for p in paths:\n"
                       "    if p.endswith('.tmp'):\n"
                       "        apis.file_system.delete_file(file_path=p, access_token=token)\n",
                 checks=changed("file_system.File", "n_deleted removed",
                                "exactly the .tmp files under ~/downloads are deleted and no other file is changed")
                 + """\
    test.case(all(f.path.endswith(".tmp") and "/downloads/" in f.path for f in removed), "==", True)
""")


def fs_move_file(rng: random.Random) -> dict:
    files = _tree(rng, rng.randint(5, 9))
    name = f"{rng.choice(WORDS)}_{rng.choice(['invoice', 'ticket', 'receipt'])}.txt"
    files[f"downloads/{name}"] = f"{name} for order {rng.randint(1000, 9999)}"
    dest = rng.choice(["work", "travel"])
    return chore("file_system", 2, setup=_fs_setup(files),
                 public={"old": HOME + f"downloads/{name}", "new": HOME + f"documents/{dest}/{name}",
                         "content": files[f"downloads/{name}"], "n_files": len(files)},
                 instruction=f"Move the file ~/downloads/{name} into my ~/documents/{dest}/ directory, keeping "
                             "its name.",
                 steps=f"apis.file_system.move_file(source_file_path='~/downloads/{name}', "
                       f"destination_file_path='~/documents/{dest}/{name}', access_token=token)\n",
                 checks="""
with test("the file is at the new path with its content, no longer at the old path, and no file is lost"):
    me = models.end.file_system.User.find_one(email=main_user.email)
    moved = models.end.file_system.File.find_one(path=public_data.new, user_id=me.id)
    test.case(moved is not None, "==", True)
    test.case(moved.content if moved else None, "==", public_data.content)
    test.case(models.end.file_system.File.find_one(path=public_data.old, user_id=me.id), "==", None)
    test.case(len(models.end.file_system.File.find_all(user_id=me.id)), "==", public_data.n_files)
""")


FAMILIES: dict[str, Callable[[random.Random], dict]] = {
    "fs_count_ext": fs_count_ext, "fs_sum_csv": fs_sum_csv, "fs_create_file": fs_create_file,
    "fs_delete_ext": fs_delete_ext, "fs_move_file": fs_move_file,
}
