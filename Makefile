# One place for the lab's commands; the README's two leading commands are `make lab` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
# `make bench SCENARIO=iit ARGS=--dry-run`, `make report RUN=results/<folder>`,
# `make lab TOPOLOGY=a-to-b` (one of topologies/*.yaml; default one-hop).
TOPOLOGY ?= one-hop
# `make lab PROFILES=node` adds compose profiles' services (node: the Node.js services, docs/node.md).
PROFILES ?=
SCENARIO ?= smoke
ARGS ?=
# `make bench WHERE=lab`: the runner inside the compose network (offline/bench-in-lab).
WHERE ?= host
RUN ?=
# `make netem NETWORK=region`: a profile of toxiproxy/profiles.toml, or direct, or show.
NETWORK ?= show

.PHONY: proto
# Regenerate the stubs from the one contract (never edit services/wirelab/v1 by hand).
proto:
	$(PYTHON) -m grpc_tools.protoc -Iproto \
		--python_out=services --pyi_out=services --grpc_python_out=services \
		--mypy_grpc_out=services \
		proto/wirelab/v1/wirelab.proto

.PHONY: knobs
# After editing the knob table (contract/knobs.json, contract/knobs-lab.json): the reference page
# docs/knobs.md, the other pages' <!-- knobs: ... --> blocks, the services' typed fields
# wirelab/knobfields.py and the runner's wirelab_bench/runnerfields.py (tests/config/test_knobs.py
# fails while one is stale).
knobs:
	$(PYTHON) -m wirelab.contract.knobdoc
	$(PYTHON) -m wirelab.contract.fieldgen

.PHONY: lock
# Re-pin requirements.lock (every package of every extra, for this project's Python and platform)
# after editing pyproject.toml's dependencies; `--exclude-newer` makes the result repeatable.
lock:
	.venv/bin/uv pip compile pyproject.toml --all-extras --python-version 3.11 \
		--python-platform x86_64-unknown-linux-gnu \
		--exclude-newer $$(date -u +%Y-%m-%dT00:00:00Z) -o requirements.lock

.PHONY: test
# Everything CI runs: installs test dependencies, then lint, unit, integration, browser, e2e.
test:
	tests/run

.PHONY: lab lab-down offline-images
# Build and start the whole lab, returning when every service is healthy. First Docker, its
# engine and the compose plugin when missing (as root; otherwise it says what to run). Uses the
# offline stand-in images (and leaves Grafana out) when no registry answers, or WIRELAB_OFFLINE=1.
lab:
	WIRELAB_TOPOLOGY=$(TOPOLOGY) WIRELAB_PROFILES="$(PROFILES)" offline/lab-up

# Stop the lab; its Prometheus/Grafana volumes stay (`docker compose down -v` drops them too).
lab-down:
	offline/compose --profile bench --profile node --profile amqp --profile netem --profile traces down --remove-orphans

.PHONY: swarm swarm-down
# The lab as a Docker Swarm stack, from the same compose files (TOPOLOGY and PROFILES as above),
# roles placed by node labels; on an engine in no swarm, a single-node one (docs/swarm.md).
swarm:
	WIRELAB_TOPOLOGY=$(TOPOLOGY) WIRELAB_PROFILES="$(PROFILES)" swarm/up

# Remove the stack (volumes kept); leave the swarm if `make swarm` made it and it has one node.
swarm-down:
	swarm/down

# Build the offline stand-in images only (each skipped when already present).
offline-images:
	offline/build-images

.PHONY: tools
# The benchmarks' load tools (ghz, vegeta) from the Go module proxy, pinned, and the lab's own
# precise generator, wirelab-loadgen, built from loadgen/ (offline/go-tools).
tools:
	offline/go-tools

.PHONY: bench report netem
# `wirelab bench` / `wirelab report` from the host, against the lab's published ports: the
# project's virtualenv gets the runner and the notebook's packages first (once; offline/venv).
# WHERE=lab runs it as the lab's bench service instead, inside the compose network: loads of
# thousands of connections (iit's Heavy) outlive the published ports' proxy only that way here.
bench:
ifeq ($(WHERE),lab)
	offline/bench-in-lab $(SCENARIO) $(ARGS)
else
	"$$(offline/venv bench,notebook)/bin/wirelab" bench $(SCENARIO) $(ARGS)
endif

report:
	"$$(offline/venv bench,notebook)/bin/wirelab" report $(RUN) $(ARGS)

# The profile on the running lab's Toxiproxy (`make lab PROFILES=netem`; docs/network.md).
netem:
	"$$(offline/venv bench)/bin/wirelab" network $(NETWORK) $(ARGS)
