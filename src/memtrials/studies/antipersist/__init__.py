"""The anti-persistence study (docs/antipersist.md): trajectory, abstraction, joint and
anti-persistence memory with the synthesis-mode bandit, against ReAct, Reflexion, ExpeL and
AutoRefine; training streams, frozen held-out evaluation, tables and figures."""
