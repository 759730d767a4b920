"""Repository-level tests; a package so tests.config.queries is importable by other areas."""
