"""Config tests: Prometheus, Grafana and compose files checked without Docker."""
