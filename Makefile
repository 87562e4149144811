# Every target a person or CI needs; the README names them.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
SHARED ?= ../shared

.PHONY: demo system-deps venv test checks suite soak-health-test chaos-test lint typecheck unit integration conformance scenarios kafka redis kube kube-build kube-build-background helm-build helm-build-background infra-fetch bench asyncapi-parser

demo: venv  ## run the embedded demo (one process, no Kafka)
	$(BIN)/rollout demo

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: venv
	$(BIN)/mypy

conformance: venv
	$(PY) $(SHARED)/conformance/check.py --cmd "$(BIN)/rollout simulate" $(SHARED)/conformance/cases

scenarios: venv
	$(PY) $(SHARED)/conformance/check.py --cmd "$(BIN)/rollout simulate" tests/scenarios

system-deps:  ## Debian packages for the full suite (redis-server, Java 17, Maven), when missing
	bash deploy/local/system-deps.sh

## the whole suite on a fresh machine: installs what is missing, then lint, types, conformance,
## scenarios, unit, property, contract, integration and end-to-end tests (starts Kafka and Redis itself)
test: venv kube-build-background helm-build-background system-deps infra-fetch asyncapi-parser
	$(MAKE) --no-print-directory -j2 checks suite failover soak-health-test chaos-test

## lint, types, conformance and scenarios use the CPU while the suite mostly waits on its servers,
## so they run beside it (two jobs); when they are done the failover tests take their place beside
## the suite (6 to 8 minutes for the four here; inside the suite they would take it past its 30),
## after them the 60 s health soak (2 to 4 minutes), and then the ten chaos seeds (6 to 9 minutes);
## any failure still fails `make test`
checks: lint typecheck conformance scenarios

CHAOS_TEST := tests/chaos/test_fault_injection.py
suite: venv
	$(BIN)/pytest -q --durations=30 -m "not failover_e2e and not health_soak" --ignore=$(CHAOS_TEST)

## the chaos test's CI variant (10 seeds x 2 process faults + 2 input faults), a job of its own
## beside the suite
chaos-test: venv infra-fetch
	$(BIN)/pytest -q --durations=10 $(CHAOS_TEST)

## the 60 s sustained run through the real health services (`make soak-health`'s test, 500 heartbeats/s
## through two monitor workers to the planner with a rollout in progress); each of its waits is
## bounded, so a stalled side fails it with where the topics and groups stood
soak-health-test: venv infra-fetch
	$(BIN)/pytest -q -m health_soak tests/load/test_health_soak.py

## the official AsyncAPI parser (npm), which the tests run with node on `rollout schemas asyncapi`
ASYNCAPI_DIR := tests/asyncapi
asyncapi-parser: $(ASYNCAPI_DIR)/node_modules/.installed
$(ASYNCAPI_DIR)/node_modules/.installed: $(ASYNCAPI_DIR)/package.json $(ASYNCAPI_DIR)/package-lock.json
	npm ci --prefix $(ASYNCAPI_DIR) --no-audit --no-fund --loglevel=error
	touch $@

## local infrastructure without Docker (see `python -m rollout_devenv --help`). Their data is deleted
## when they stop; DATA=DIR keeps it (and the port) in DIR, so they can be stopped and started again
## under a running system (Redis then writes an append-only file, fsynced, as in production).
DATA ?=
kafka: venv  ## run a real single-node Kafka broker until Ctrl-C; prints KAFKA_BOOTSTRAP=host:port
	$(PY) -m rollout_devenv kafka run $(if $(DATA),--data-dir $(DATA))

redis: venv  ## run a real redis-server until Ctrl-C; prints REDIS_URL=redis://host:port/0
	$(PY) -m rollout_devenv redis run $(if $(DATA),--data-dir $(DATA))

kube: venv kube-build  ## run etcd and a kube-apiserver with the Cluster API and Fleet CRDs until Ctrl-C; prints KUBECONFIG=path
	$(PY) -m rollout_devenv kube run

kube-build: venv  ## build kube-apiserver with Go, once per machine (~/.cache/rollout; ~15 min on one core)
	$(PY) -m rollout_devenv kube build

## on a machine without it, kube-apiserver builds while the rest of the suite runs: the Kubernetes
## tests run last and wait for the build (bounded; a failed build fails them)
kube-build-background: venv
	$(PY) -m rollout_devenv kube build --background

helm-build: venv  ## build helm with Go from the module proxy, once per machine (~/.cache/rollout)
	$(PY) -m rollout_devenv helm build

## like kube-build-background: the chart's tests wait for the build when they need helm
helm-build-background: venv
	$(PY) -m rollout_devenv helm build --background

infra-fetch: venv  ## fetch the Kafka broker's jars with Maven, once per machine (~/.cache/rollout)
	$(PY) -m rollout_devenv kafka fetch

bench: venv  ## engine, Kafka, latency, executor-scaling, health-scaling and whole-rollout benchmarks; writes docs/benchmarks.md (~27 min on 2 shared cores)
	$(PY) -m bench.run

## nightly fault injection: the chaos test with more seeds and faults (CI runs 10 seeds x 2 process
## faults + 2 input faults in `make test`, as `make chaos-test`); writes the JSON summary and renders it into docs/reliability.md
CHAOS_SEEDS ?= 50
CHAOS_FAULTS ?= 4
CHAOS_INPUT_FAULTS ?= 4
CHAOS_REPORT ?= build/chaos-report.json
# production: a three-node Kafka cluster and Redis with Sentinel, with broker, controller and Redis failover faults
CHAOS_TOPOLOGY ?= single
.PHONY: chaos
chaos: venv infra-fetch  ## SIGKILLs, restarts, inventory changes and bad records during real rollouts; gate audit of every seed
	ROLLOUT_CHAOS_SEEDS=$(CHAOS_SEEDS) ROLLOUT_CHAOS_FAULTS=$(CHAOS_FAULTS) ROLLOUT_CHAOS_INPUT_FAULTS=$(CHAOS_INPUT_FAULTS) \
		ROLLOUT_CHAOS_REPORT=$(CHAOS_REPORT) ROLLOUT_CHAOS_TOPOLOGY=$(CHAOS_TOPOLOGY) \
		$(BIN)/pytest -q tests/chaos; status=$$?; \
		$(PY) tests/chaos/render_report.py $(CHAOS_REPORT) docs/reliability.md; exit $$status

## whole 60-cluster rollouts on the three-node Kafka cluster and Redis with Sentinel while brokers,
## the KRaft controller and the Redis primary fail (1 to 2 minutes each; `make test` runs them
## as a job of their own beside the suite)
.PHONY: failover
failover: venv infra-fetch
	$(BIN)/pytest -q -m failover_e2e tests/failover

## the health path under a sustained heartbeat rate: reporters' heartbeats -> HEALTH_WORKERS monitor
## processes -> the planner with a rollout in progress; lags p50/p99/max and false stale marks
HEALTH_RATE ?= 10000
HEALTH_SECONDS ?= 300
HEALTH_WORKERS ?= 4
.PHONY: soak-health
soak-health: venv infra-fetch  ## HEALTH_RATE heartbeats/s for HEALTH_SECONDS through the real health monitors and planner
	nice -n 10 $(PY) -m bench.soak_health --rate $(HEALTH_RATE) --seconds $(HEALTH_SECONDS) --workers $(HEALTH_WORKERS) --page docs/benchmarks.md

SOAK_SECONDS ?= 600
.PHONY: soak
soak: venv infra-fetch  ## the readiness soak at 100,000 clusters for SOAK_SECONDS (CI runs 60 s)
	ROLLOUT_SOAK_SECONDS=$(SOAK_SECONDS) ROLLOUT_SOAK_REPORT=soak-report.json $(BIN)/pytest -q -s tests/load/test_readiness_soak.py

## generated scenarios through the audit, a restarted twin and the shared checker (any line of it
## fails a seed); each failing seed is shrunk to a scenario under build/fuzz/ (the fixed first 300
## seeds run in `make test`)
SEEDS ?= 1000
JOBS ?= 1
.PHONY: fuzz
fuzz: venv
	$(PY) tests/fuzz/campaign.py --seeds $(SEEDS) --jobs $(JOBS)
