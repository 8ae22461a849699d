"""The learned calibrator of action calibration (*When History Fails to Become Experience*,
section 6, Appendices D.4, E, G.2, G.3): training labels from paired next-action
comparisons (:mod:`.contexts` -> :mod:`.generate` -> :mod:`.screen` -> :mod:`.compare` ->
:mod:`.labels` -> :mod:`.dataset`), supervised fine-tuning (:mod:`.sft`, run in its own
environment), calibrator rollouts (:mod:`.entry`) and the tables (:mod:`.report`).
"""
