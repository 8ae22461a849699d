"""The cast of the authored AppWorld task set: the supervisor, their three friends, the apps
they hold accounts in with the supervisor's passwords, and the clock (when the base world
was created and when every task happens).

Shared by the data builder (:mod:`memtrials.envs.appworld.data`, which writes these people
into the base databases) and the task definitions (:mod:`memtrials.envs.appworld.tasks`),
so neither imports the other at module level.
"""

from __future__ import annotations

SUPERVISOR = {"first_name": "Ada", "last_name": "Moreau", "email": "ada.moreau@gmail.com",
              "phone_number": "2125550143", "birthday": "1991-04-12", "sex": "female"}
FRIENDS = [
    {"first_name": "Ravi", "last_name": "Patel", "email": "ravi.patel@gmail.com", "phone_number": "2125550171",
     "birthday": "1989-02-03", "sex": "male"},
    {"first_name": "Lena", "last_name": "Fischer", "email": "lena.fischer@gmail.com", "phone_number": "2125550188",
     "birthday": "1992-09-21", "sex": "female"},
    {"first_name": "Tom", "last_name": "Okafor", "email": "tom.okafor@gmail.com", "phone_number": "2125550193",
     "birthday": "1988-12-30", "sex": "male"},
]
APPS = ("simple_note", "todoist", "venmo", "splitwise", "phone", "file_system", "spotify")
PASSWORDS = {"simple_note": "note-Ada-91", "todoist": "todo-Ada-91", "venmo": "venmo-Ada-91",
             "splitwise": "split-Ada-91", "phone": "phone-Ada-91", "file_system": "files-Ada-91",
             "spotify": "music-Ada-91"}
TASK_DATETIME = "2023-05-18T10:00:00"
BASE_TIME = "2023-05-01T09:00:00"
