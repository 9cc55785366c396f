"""Subcommands of the ``ikatkit`` command, one module per group: each has ``add(sub)``."""
