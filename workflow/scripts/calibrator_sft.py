"""Rule calibrator_sft: fine-tune the calibrator with the training environment's interpreter
(its own process: the main environment has no torch)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

import json
import os
import subprocess
import sys

s = snakemake  # noqa: F821
if not os.path.exists(s.params.python):
    sys.exit(f"config key calibrator.train.python: {s.params.python} does not exist. Fix: run bin/setup (it "
             "creates .venv-train from envs/train.txt) or name an interpreter that has envs/train.txt installed")
with open(s.output.recipe, "w", encoding="utf-8") as fh:
    json.dump(dict(s.params.recipe), fh, indent=1, sort_keys=True)
with open(s.log[0], "w", encoding="utf-8") as log:
    subprocess.run([s.params.python, s.input.code, "--recipe", s.output.recipe, "--dataset", s.input.dataset,
                    "--out", s.params.folder], check=True, stdout=log, stderr=subprocess.STDOUT)
