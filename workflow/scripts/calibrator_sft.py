"""Rule calibrator_sft: fine-tune the calibrator with the training environment's interpreter
(its own process: the main environment has no torch).  A ``base_model`` that names an
embedded registry endpoint is resolved here to its shipped GGUF (SHA-256 checked)."""

from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821  (run in the warm job server: memtrials.pipeline.jobserver)

import json
import os
import subprocess
import sys

from memtrials.config import load_models
from memtrials.llm.local.embedded import weights_path

s = snakemake  # noqa: F821
if not os.path.exists(s.params.python):
    sys.exit(f"config key calibrator.train.python: {s.params.python} does not exist. Fix: run bin/setup (it "
             "creates .venv-train from envs/train.txt) or name an interpreter that has envs/train.txt installed")
recipe = dict(s.params.recipe)
models = load_models(s.params.models_file)
base = models.get(recipe["base_model"])
if base is not None:
    if base.embedded is None or base.embedded.parts or base.embedded.checkpoint or base.task != "chat":
        sys.exit(f"config key calibrator.train.base_model: '{recipe['base_model']}' is a registry endpoint but not "
                 "an embedded chat model in one GGUF file; name one (e.g. smollm2), a Hugging Face id or a folder")
    recipe["base_endpoint"], recipe["base_model"] = recipe["base_model"], str(weights_path(base.embedded))
with open(s.output.recipe, "w", encoding="utf-8") as fh:
    json.dump(recipe, fh, indent=1, sort_keys=True)
src = os.path.join(os.getcwd(), "src")
env = {**os.environ, "PYTHONPATH": src + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
with open(s.log[0], "w", encoding="utf-8") as log:
    subprocess.run([s.params.python, "-m", "memtrials.studies.history.calibrator.sft", "--recipe", s.output.recipe,
                    "--dataset", s.input.dataset, "--out", s.params.folder], check=True, stdout=log,
                   stderr=subprocess.STDOUT, env=env)
