"""Tests of the Locust glue: shapes, metrics, options and real headless, distributed, UI runs."""
