"""Speed and answer validity of the embedded model (the numbers the README states).

Runs the embedded endpoint (default: smollm2) through memtrials.llm with the cache off:
- speed: prompt and generated tokens per second over a set of chat requests, from the
  server's usage fields and the client's latencies;
- validity: the share of JSON answers that parse and match a two-tool schema, free
  (schema in the prompt) against constrained (response_format json_schema), and the
  share of next-action replies that are exactly an admissible action, free against a
  grammar constraint.
The last line is the constrained-validity ratio (valid constrained answers / requests).

    .venv/bin/python benchmarks/bench_embedded.py [--endpoint smollm2] [--n 12]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import tempfile
from pathlib import Path

import yaml

from memtrials.llm import open_client

REPO = Path(__file__).resolve().parents[1]
TOOLS = [("grelvox", "tamberin"), ("quorvat", "melsine"), ("draxil", "pombery"), ("voskel", "furnage")]
ACTIONS = ["go to kitchen", "open fridge", "take apple 1", "look", "inventory"]
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["first_tool", "reason"],
          "properties": {"first_tool": {"type": "string"}, "reason": {"type": "string", "maxLength": 120}}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", default="smollm2")
    ap.add_argument("--n", type=int, default=12)
    args = ap.parse_args()
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["models_file"] = str(REPO / config["models_file"])
    with tempfile.TemporaryDirectory() as tmp:
        config["cache"] = {"path": str(Path(tmp) / "cache" / "llm.sqlite"), "mode": "off", "backend": "sqlite"}
        asyncio.run(run(config, args))


async def run(config: dict, args: argparse.Namespace) -> None:
    m = args.endpoint
    async with open_client(config, "bench/embedded", None) as client:
        json_free = json_con = act_free = act_con = 0
        prompt_tok = gen_tok = 0
        t_total = 0.0
        for i in range(args.n):
            a, b = TOOLS[i % len(TOOLS)]
            schema = copy.deepcopy(SCHEMA)
            schema["properties"]["first_tool"]["enum"] = [a, b]
            q = [{"role": "user", "content": f"Task {i}: export a report. Tool {a} succeeded 85% of recent runs, "
                                              f"tool {b} 60%. Which tool do you try first? Give first_tool and a one-sentence reason."}]
            for structured in (False, True):
                client.endpoints[m] = client.endpoints[m].__class__(**{**client.endpoints[m].__dict__, "structured_output": structured})
                j = await client.complete_json(m, q, schema, max_tokens=80, sample=i)
                json_free += (not structured) and j.valid
                json_con += structured and j.valid
                prompt_tok += j.chat.usage.prompt_tokens
                gen_tok += j.chat.usage.completion_tokens
                t_total += j.chat.latency_s
            obs = [{"role": "user", "content": f"You are in a kitchen (step {i}). Your task: put a cool apple on the table.\n"
                                               f"Admissible actions:\n" + "\n".join(f"- {x}" for x in ACTIONS) +
                                               "\nReply with exactly one admissible action."}]
            free = await client.complete(m, obs, max_tokens=16, sample=i)
            con = await client.complete(m, obs, max_tokens=16, sample=i, choices=ACTIONS)
            act_free += free.text.strip() in ACTIONS
            act_con += con.text.strip() in ACTIONS
    n = args.n
    print(f"endpoint {m}: {n} two-tool JSON questions and {n} next-action prompts")
    print(f"JSON valid: free {json_free}/{n}, with schema {json_con}/{n}")
    print(f"action admissible: free {act_free}/{n}, with grammar {act_con}/{n}")
    print(f"mean latency {t_total / (2 * n):.2f} s per JSON answer; {prompt_tok / (2 * n):.0f} prompt and "
          f"{gen_tok / (2 * n):.0f} completion tokens per answer; {gen_tok / t_total:.1f} completion tokens/s end to end")
    print(f"constrained validity ratio: {(json_con + act_con) / (2 * n):.3f}")


if __name__ == "__main__":
    main()
