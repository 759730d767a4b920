"""One conformance and bad-input suite for every runtime and protocol (cases.py, test_suite.py)."""
