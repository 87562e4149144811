# Every target a person or CI needs; the README names them.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
SHARED ?= ../shared

.PHONY: demo venv test lint typecheck unit integration conformance scenarios kafka redis infra-fetch bench

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

## the whole suite: lint, types, unit, property, scenario and integration tests (starts Kafka and Redis itself)
test: lint typecheck conformance scenarios
	$(BIN)/pytest -q

## local infrastructure without Docker (see `python -m rollout_devenv --help`)
kafka: venv  ## run a real single-node Kafka broker until Ctrl-C; prints KAFKA_BOOTSTRAP=host:port
	$(PY) -m rollout_devenv kafka run

redis: venv  ## run a real redis-server until Ctrl-C; prints REDIS_URL=redis://host:port/0
	$(PY) -m rollout_devenv redis run

infra-fetch: venv  ## fetch the Kafka broker's jars with Maven, once per machine (~/.cache/rollout)
	$(PY) -m rollout_devenv kafka fetch
