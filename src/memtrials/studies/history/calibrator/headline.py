"""The calibrator's headline for the scorecard (:mod:`memtrials.pipeline.scorecard`): at one
endpoint (the actor), the calibrator's gain in full-rollout task success over Raw and over
Causal Transition (Table 8's comparison), paired by task over the rollout environments, with
the paired bootstrap of :func:`memtrials.studies.history.headline.paired_headline`.

The Calibrator cells are those of a trained calibrator when the config rolls one out
(``calibrator.rollouts.trained``: the first), else those of ``roles.calibrator``; the reading
says which, and whether it was verified trained (:func:`.rollouts.trained_endpoints`) or is an
untrained stand-in."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memtrials.report.scorecard import Headline
from memtrials.studies.history.calibrator.rollouts import calibrator_label, trained_endpoints
from memtrials.studies.history.calibrator.workflow import CalibratorWorkflow
from memtrials.studies.history.headline import paired_headline, read

STUDY = CalibratorWorkflow.name
OVER_RAW, OVER_CAUSAL = CalibratorWorkflow.headline_quantities


def headline(model: str, inputs: Mapping[str, Sequence[str]], options: Mapping[str, Any]) -> list[Headline]:
    who = str(options["calibrator"])
    trained = trained_endpoints(dict(options["trained_folders"]), {who: list(inputs["calibrator_calls"])},
                                list(options["served"]))
    label = calibrator_label([who], trained)
    cal, n_boot = read(inputs["calibrator"]), int(options["n_boot"])
    return [paired_headline(STUDY, OVER_RAW, read(inputs["raw"]), cal, n_boot, label),
            paired_headline(STUDY, OVER_CAUSAL, read(inputs["causal"]), cal, n_boot, label)]
