"""Tests of the memory systems (hindsight.memory)."""
