"""Write the golden history cells that ``tests/history/test_history_unchanged.py`` replays.

Run on purpose only (``python tests/history/golden/make_golden.py``): it starts the
loopback endpoint on the fixed port 38517 (which must be free), plays real ScienceWorld
episodes against it and keeps the model cache and every output Parquet (and the call
journals in ``records/``, rewritten from scratch).  The test replays the same cells from a
copy of that cache with nothing listening on the port, so a change that alters any
prompt, any step row or any record fails it.

The data was first made with the code before the episode runner moved into
``memtrials.agent.runner``, and the moved code reproduced it exactly (shown at commit
c1839e8).  It is now made with the current code after the faithfulness fixes of issue 13
(reference records labelled apart, the Experience at resumption reviewing the last
executed transition, the F.2 chat reference message, the continuations' ``calibrator``
column), which changed the continuation cells only; rollouts and probe are unchanged; and
remade once more when call records gained the serving-contract columns (reported model,
provider, billed cost, mismatch), which changed no episode or step content.  Remade again (3 December) when ScienceWorld's JVM got a
constant identity hash (``memtrials.envs.scienceworld.engine.JVM_OPTIONS``): the order of a room's
objects and doors in observations is now the order they were added, no longer one that varied
with the JVM's threads; the cells now use the default joined valid-action list, which since then
gives the same output as item by item.  Remade again (3 December) when the actor prompt stopped repeating the
task's own "Your task is to" after the template's (``memtrials.agent.prompts.task_clause``):
every actor prompt changed, and with it the loopback's choices.  On 5 December the step tables
gained the column ``carry_cut`` (issue 39: characters of a reply left out of later prompts); the
golden step files were given that column, all 0, by adding it to the files (not by rerunning this
script), and the test showed today's code reproduces them, every other column unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/ (for conftest helpers)

from golden_cells import GOLDEN_PORT, run_cells  # noqa: E402

from memtrials.testing import LoopbackServer  # noqa: E402


def policy(body):
    """Deterministic, history-dependent replies: repeats in pairs (probe), mixed reviews."""
    from memtrials.testing.policies import grammar_choices

    msgs = body.get("messages") or []
    text = "\n".join(str(m.get("content", "")) for m in msgs)
    h = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    if "supports_repetition" in str(msgs[0].get("content", "")):
        return '{"supports_repetition": false}'
    if "calibrating your own prior interaction history" in str(msgs[0].get("content", "")):
        if h % 3 == 0:
            return '{"decision":"NOUPDATE","experience":null}'
        return '{"decision":"CALIBRATE","experience":"Check the room before moving on (%d)."}' % (h % 97)
    choices = grammar_choices(body)
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {}
    if not choices and "answer" in (schema.get("properties") or {}):
        choices = list(schema["properties"]["answer"].get("enum") or [])
    if not choices:
        return "look around"
    import re

    m = re.search(r"are now at step (\d+)\.", str(msgs[-1].get("content", "")))
    step = int(m.group(1)) if m else 1 + sum(1 for x in msgs if x.get("role") == "assistant")
    # steps 2-3 of every four repeat "look around" (admissible though not always listed):
    # repeated pairs for the probe; other steps a choice fixed by the prompt
    pick = "look around" if step % 4 in (2, 3) else choices[h % len(choices)]
    import json

    return json.dumps({"answer": pick}) if "answer" in (schema.get("properties") or {}) else pick


def main() -> None:
    out = HERE / "data"
    for folder in (out, HERE / "records"):  # the journals are append-only: start them afresh
        if folder.exists():
            shutil.rmtree(folder)
    out.mkdir()
    srv = LoopbackServer(policy=policy, port=GOLDEN_PORT).start()
    try:
        run_cells(out, out / "llm.sqlite", max_retries=2)
    finally:
        srv.stop()
    for p in sorted(out.iterdir()):
        print(p.name, p.stat().st_size)


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
