"""Training data for the joint actor of section 6.4 / Appendix G.3 and its action-only
baseline, from successful rollouts.

- joint: from successful Calibrator rollouts, one example per step: the actor prompt the
  step was chosen on (with the calibrator's experiences so far beside their transitions),
  and the target ``<calibration>{G.2 output}</calibration>`` followed immediately by the
  environment action, where the calibration is the calibrator's review of the immediately
  preceding completed transition (NOUPDATE at the first step);
- action-only: from successful Raw rollouts, the actor prompt and the action alone.

Both are written as the same chat-format JSONL as the calibrator's dataset and capped at
the same number of examples (the paper trains both on equal amounts of data).  The joint
actor's rollout condition (parsing the calibration block in the actor loop) is not built.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import pandas as pd

from hindsight.files import atomic_write_text
from hindsight.llm import read_records
from hindsight.studies.history.calibrator.labels import target_text

INVALID = "INVALID"


def calibration_block(decision: str | None, experience: str | None) -> str:
    """``<calibration>{"decision":...,"experience":...}</calibration>`` (G.3); no or an invalid
    review is NOUPDATE (it left the history unchanged)."""
    if decision == "CALIBRATE" and isinstance(experience, str) and experience:
        return f"<calibration>{target_text('CALIBRATE', experience)}</calibration>"
    return f"<calibration>{target_text('NOUPDATE', None)}</calibration>"


def action_text(action: str) -> str:
    return f"<action>{action}</action>"


def _examples(episodes: Sequence[str], joint: bool) -> list[dict[str, Any]]:
    out = []
    for ep_path in episodes:
        base = ep_path[: -len(".parquet")]
        eps = pd.read_parquet(ep_path)
        steps = pd.read_parquet(base + ".steps.parquet")
        calls = read_records(base + ".calls.parquet").to_pandas().set_index("call_id")
        won = set(eps.loc[eps["won"].astype(bool), "episode_id"])
        for eid, g in steps[steps["episode_id"].isin(won)].sort_values(["episode_id", "step"]).groupby("episode_id"):
            prev: tuple[Any, Any] = (None, None)
            for r in g.to_dict("records"):
                prompt = json.loads(calls.loc[r["call_id"], "messages"])
                target = action_text(r["action"])
                if joint:
                    target = calibration_block(*prev) + target
                    prev = (r["review_decision"], r["experience"])
                out.append({"context_id": f"{eid}/{r['step']}", "prompt": prompt, "target": target})
    return out


def write_joint_data(*, calibrator_rollouts: Sequence[str], raw_rollouts: Sequence[str], out_joint: str,
                     out_action_only: str) -> tuple[int, int]:
    """Write both datasets, each cut to the smaller one's size (in a fixed order)."""
    j, a = _examples(calibrator_rollouts, True), _examples(raw_rollouts, False)
    n = min(len(j), len(a))
    for rows, path in ((j[:n], out_joint), (a[:n], out_action_only)):
        lines = [json.dumps({**x, "messages": [*x["prompt"], {"role": "assistant", "content": x["target"]}]},
                            ensure_ascii=False) for x in rows]
        atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(j), len(a)
