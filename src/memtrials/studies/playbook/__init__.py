"""The playbook-curation study (*Reliable Memory from Unstable Growth*; issue 9; docs/playbook.md).

Growth runs (ACE batched, Dynamic Cheatsheet cumulative) -> one practice round per run
(blocks, randomized inclusion, estimates, curated set) -> candidate scoring on fresh
practice episodes (RBC, Best-Full) -> evaluation of every candidate -> tables and figures.
The generic parts live in :mod:`memtrials.memory` and :mod:`memtrials.curation`.
"""
