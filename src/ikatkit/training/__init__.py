"""Training loops that run whole pipelines (above ``ikatkit.pipelines``: they load configs and run stages)."""
