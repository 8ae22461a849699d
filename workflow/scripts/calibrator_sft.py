"""Rule calibrator_sft: fine-tune the calibrator with the training environment's interpreter
(its own process: the main environment has no torch).  A ``base_model`` that names an
embedded registry endpoint is resolved here to its shipped GGUF (SHA-256 checked)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

import json
import os
import subprocess
import sys

from memtrials.studies.history.calibrator import sft_rule

s = snakemake  # noqa: F821
if not os.path.exists(s.params.python):
    sys.exit(f"config key calibrator.train.python: {s.params.python} does not exist. Fix: run bin/setup (it "
             "creates .venv-train from envs/train.txt) or name an interpreter that has envs/train.txt installed")
recipe = sft_rule.sft_recipe(s.params.recipe, s.params.models_file)
with open(s.output.recipe, "w", encoding="utf-8") as fh:
    json.dump(recipe, fh, indent=1, sort_keys=True)
src = os.path.join(os.getcwd(), "src")
env = {**os.environ, "PYTHONPATH": src + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
with open(s.log[0], "w", encoding="utf-8") as log:
    subprocess.run([s.params.python, "-m", "memtrials.studies.history.calibrator.sft", "--recipe", s.output.recipe,
                    "--dataset", s.input.dataset, "--out", s.params.folder], check=True, stdout=log,
                   stderr=subprocess.STDOUT, env=env)
