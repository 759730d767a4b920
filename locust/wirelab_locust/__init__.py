"""Locust glue for wirelab: transport users, client metrics, load shapes."""
