"""Training data for the joint actor of section 6.4 / Appendix G.3 and its action-only
baseline, from successful rollouts.

- joint: from successful Calibrator rollouts, one example per step: the joint actor's
  prompt at that step (:func:`.jointactor.actor_prompt`: the raw history with the
  calibrator's experiences beside their transitions, except the preceding transition's,
  which this very target writes) and the target ``<calibration>{G.2 output}</calibration>``
  followed immediately by ``<action>...</action>``, where the calibration is the
  calibrator's review of the immediately preceding completed transition (NOUPDATE at the
  first step);
- action-only: from successful Raw rollouts, the action-only prompt and the action alone.

Both come from rollouts on the calibrator's training splits (``calibrator.splits``, the
rules ``calibrator_joint_sources`` and ``calibrator_sources``), never from the evaluation
tasks the joint rollouts are scored on; each line names its ``env`` and ``task_id``
(:mod:`.leakage` checks them against the evaluation rollouts).

The prompts are rendered again from the recorded steps with the arms' own reply
instructions (the rollout condition of :mod:`.jointactor` sends exactly these prompts), not
taken from the source actor's calls.  Both datasets are written as the same chat-format
JSONL as the calibrator's dataset and capped at the same number of examples (the paper
trains both on equal amounts of data).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import pandas as pd

from memtrials.agent.views import Entry
from memtrials.io import atomic_write_text
from memtrials.studies.history.calibrator.jointactor import JointActorPrompts, actor_prompt, load_prompts
from memtrials.studies.history.calibrator.labels import target_text

INVALID = "INVALID"


def calibration_block(decision: str | None, experience: str | None) -> str:
    """``<calibration>{"decision":...,"experience":...}</calibration>`` (G.3); no or an invalid
    review is NOUPDATE (it left the history unchanged)."""
    if decision == "CALIBRATE" and isinstance(experience, str) and experience:
        return f"<calibration>{target_text('CALIBRATE', experience)}</calibration>"
    return f"<calibration>{target_text('NOUPDATE', None)}</calibration>"


def action_text(action: str) -> str:
    return f"<action>{action}</action>"


def _examples(episodes: Sequence[str], arm: str, prompts: JointActorPrompts) -> list[dict[str, Any]]:
    out = []
    for ep_path in episodes:
        base = ep_path[: -len(".parquet")]
        eps = pd.read_parquet(ep_path).set_index("episode_id")
        steps = pd.read_parquet(base + ".steps.parquet")
        won = set(eps.index[eps["won"].astype(bool)])
        for eid, g in steps[steps["episode_id"].isin(won)].sort_values(["episode_id", "step"]).groupby("episode_id"):
            env, task = str(eps.loc[eid, "env"]), str(eps.loc[eid, "task"])
            entries: list[Entry] = []
            prev: tuple[Any, Any] = (None, None)
            for r in g.to_dict("records"):
                shown = json.loads(r["shown_actions"]) if isinstance(r["shown_actions"], str) else None
                prompt = actor_prompt(prompts, env=env, task=task, entries=entries, observation=r["obs_before"],
                                      step=int(r["step"]), shown=shown, arm=arm)
                target = action_text(r["action"])
                if arm == "joint":
                    target = calibration_block(*prev) + target
                    if entries:   # the preceding transition's experience shows from the next prompt on
                        last = entries[-1]
                        entries[-1] = Entry(last.observation, last.action, prev[1] if prev[0] == "CALIBRATE" else None)
                    prev = (r["review_decision"], r["experience"])
                entries.append(Entry(r["obs_before"], r["action"]))
                out.append({"context_id": f"{eid}/{r['step']}", "env": env, "task_id": str(r["task_id"]),
                            "prompt": prompt, "target": target})
    return out


def write_joint_data(*, calibrator_rollouts: Sequence[str], raw_rollouts: Sequence[str], out_joint: str,
                     out_action_only: str, actor_prompts_dir: str, calibrator_prompts_dir: str) -> tuple[int, int]:
    """Write both datasets, each cut to the smaller one's size (in a fixed order)."""
    j = _examples(calibrator_rollouts, "joint", load_prompts(actor_prompts_dir, calibrator_prompts_dir, "joint"))
    a = _examples(raw_rollouts, "action_only", load_prompts(actor_prompts_dir, calibrator_prompts_dir, "action_only"))
    n = min(len(j), len(a))
    for rows, path in ((j[:n], out_joint), (a[:n], out_action_only)):
        lines = [json.dumps({**x, "messages": [*x["prompt"], {"role": "assistant", "content": x["target"]}]},
                            ensure_ascii=False) for x in rows]
        atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(j), len(a)
