"""A static HTML viewer of runs (``ikatkit view``): conversations, turns, cited passages, PTKB, judgements and two
runs side by side; :mod:`ikatkit.viewer.data` gathers what a page shows, :mod:`ikatkit.viewer.render` writes it."""
