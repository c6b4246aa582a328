"""The contract: grammar and parser, family base class, BatchEnv, registry, seeding."""
from .batch_env import BatchEnv
from .family import Family
from .grammar import ActionBatch, ActionSpec, Grammar
from .registry import list_envs, make, make_family, spec

__all__ = ["ActionBatch", "ActionSpec", "BatchEnv", "Family", "Grammar", "list_envs", "make",
           "make_family", "spec"]
