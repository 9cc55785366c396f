"""The built-in stage modules, in the order ``ikatkit stages`` and docs/stages.md list their stages: what
ikatkit's own ``ikatkit.stages`` entry point (``builtin``, in its ``pyproject.toml``) gives the registry, as a
third-party package's entry point gives its stages."""

from ikatkit.stages import context, core, evidence, memory, partition, persona, plan, refine

MODULES = (core, context, refine, partition, memory, plan, evidence, persona)
