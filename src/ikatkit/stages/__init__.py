"""The built-in pipeline stages, each module registering its classes with the engine's registry
(:mod:`ikatkit.pipelines.registry`) as a third-party stage package does; importing one imports no other."""
