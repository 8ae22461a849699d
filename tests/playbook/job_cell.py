"""One job of the playbook study in its own process, for the kill -9 tests.

``python job_cell.py ARGS.json`` where ARGS holds ``config``, ``part``, ``base``, ``tasks``, ``k``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

if __name__ == "__main__":
    from tests.playbook.helpers import run_part

    a = json.loads(Path(sys.argv[1]).read_text())
    run_part(a["config"], a["part"], Path(a["base"]), Path(a["tasks"]), k=int(a["k"]))
