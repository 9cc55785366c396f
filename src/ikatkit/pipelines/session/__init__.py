"""A run's output folder in one place: lock, cache scope, preflight, fingerprint, the per-turn record store,
records into a run, writing and validating it, the manifest (:class:`RunSession`)."""

from ikatkit.pipelines.session.convert import to_run
from ikatkit.pipelines.session.manifest import RunManifest, read_manifest
from ikatkit.pipelines.session.session import Outcome, RunSession

__all__ = ["Outcome", "RunManifest", "RunSession", "read_manifest", "to_run"]
