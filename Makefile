# One place for the lab's commands; the README's two leading commands are `make lab` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3

.PHONY: proto
# Regenerate the stubs from the one contract (never edit services/wirelab/v1 by hand).
proto:
	$(PYTHON) -m grpc_tools.protoc -Iproto \
		--python_out=services --pyi_out=services --grpc_python_out=services \
		--mypy_grpc_out=services \
		proto/wirelab/v1/wirelab.proto

.PHONY: test
# Everything CI runs: installs test dependencies, then lint, unit, integration, browser, e2e.
test:
	tests/run

.PHONY: lab lab-down offline-images
# Build and start the whole lab, returning when every service is healthy. Uses the offline
# stand-in images (and leaves Grafana out) when no registry answers, or when WIRELAB_OFFLINE=1.
lab:
	offline/lab-up

# Stop the lab; its Prometheus/Grafana volumes stay (`docker compose down -v` drops them too).
lab-down:
	offline/compose --profile bench down --remove-orphans

# Build the offline stand-in images only (each skipped when already present).
offline-images:
	offline/build-images
