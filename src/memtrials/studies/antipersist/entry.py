"""Entry points of the anti-persistence study's rules, one per rule, keyword arguments only
(called by the thin scripts ``workflow/scripts/antipersist_*.py``); ``known_answer`` is rule
``antipersist_known_answer`` (:func:`.known_answer.known_answer_run`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memtrials.studies.antipersist.evaluate import evaluate
from memtrials.studies.antipersist.known_answer import known_answer_run as known_answer
from memtrials.studies.antipersist.report import write_report
from memtrials.studies.antipersist.train import train_stream


async def train(config: Mapping[str, Any], *, model: str, env: str, design: str, seed: str, cell: Mapping[str, Any],
                prompts_dir: str, actor_prompts_dir: str, tasks_path: str, out_episodes: str, out_steps: str,
                out_calls: str, out_memory: str, out_rounds: str) -> None:
    """One training stream (``seed`` is the wildcard, 1-based)."""
    await train_stream(config, model=model, env=env, design=design, seed_index=int(seed), cell=cell,
                       prompts_dir=prompts_dir, actor_prompts_dir=actor_prompts_dir, tasks_path=tasks_path,
                       out_episodes=out_episodes, out_steps=out_steps, out_calls=out_calls, out_memory=out_memory,
                       out_rounds=out_rounds)


async def evaluation(config: Mapping[str, Any], *, model: str, env: str, design: str, seed: str,
                     cell: Mapping[str, Any], prompts_dir: str, actor_prompts_dir: str, tasks_path: str,
                     memory_path: str, out_episodes: str, out_steps: str, out_calls: str, out_record: str,
                     rounds_path: str | None = None, every_round: bool = False) -> None:
    """One held-out evaluation of a trained memory (with ``every_round``: of each round's snapshot)."""
    await evaluate(config, model=model, env=env, design=design, seed_index=int(seed), cell=cell,
                   prompts_dir=prompts_dir, actor_prompts_dir=actor_prompts_dir, tasks_path=tasks_path,
                   memory_path=memory_path, out_episodes=out_episodes, out_steps=out_steps, out_calls=out_calls,
                   out_record=out_record, rounds_path=rounds_path, every_round=bool(every_round))


def report(*, eval_paths: list[str], train_paths: list[str], tables_dir: str, figures_dir: str, index: str,
           memory_paths: Sequence[str] = (), sweeps: Sequence[Sequence[Any]] = ()) -> None:
    write_report(eval_paths, train_paths, tables_dir, figures_dir, index, memory_paths=memory_paths, sweeps=sweeps)
