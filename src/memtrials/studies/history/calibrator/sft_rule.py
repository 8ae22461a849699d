"""What rule ``calibrator_sft`` does in the main environment before it hands over to the
training environment (:mod:`.sft`): the recipe it writes.  Its own module, so that no other
rule's code input changes with it."""

from __future__ import annotations

from typing import Any, Mapping

from memtrials.config import ConfigError, load_models
from memtrials.llm.local.embedded import weights_path


def sft_recipe(recipe: Mapping[str, Any], models_file: str) -> dict[str, Any]:
    """The recipe the training entry point reads: a ``base_model`` that names an embedded
    registry endpoint becomes its shipped GGUF's path (SHA-256 checked), the name kept as
    ``base_endpoint``; any other (a Hugging Face id, a folder) is passed as is."""
    out = dict(recipe)
    base = load_models(models_file).get(str(out["base_model"]))
    if base is not None:
        w = base.embedded
        if w is None or w.parts or w.checkpoint or base.task != "chat":
            raise ConfigError(f"config key calibrator.train.base_model: '{out['base_model']}' is a registry endpoint "
                              "but not an embedded chat model in one GGUF file; name one (e.g. smollm2), a Hugging "
                              "Face id or a folder")
        out["base_endpoint"], out["base_model"] = out["base_model"], str(weights_path(w))
    return out
