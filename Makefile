# connect-kinesis: Kinesis Data Streams for Benthos.
#
#   make demo   run a real pipeline against a local emulator and Redis
#   make test   everything: vet, format, unit and integration tests, docs, examples
#
# `make deps` installs what the tests need (redis-server and prometheus, for
# promtool and the alert test, from apt; the Kinesis and DynamoDB emulators
# from npm into .deps/npm); the other targets call it.

SHELL       := /usr/bin/env bash
GO          ?= go
BIN         := bin/connect-kinesis
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
DATE        := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS     := -X main.version=$(VERSION) -X main.dateBuilt=$(DATE)
NPM_DIR     := .deps/npm
# -parallel: most integration tests wait on lease and commit periods rather
# than compute, and call t.Parallel(). Each starts its own kinesis-mock, a
# heavy process: four at a time on two cores starved the fan-out tests (a
# SIGKILLed instance's subscriptions outlived their 90 s window), so two.
TEST_FLAGS  ?= -race -count=1 -timeout 45m -parallel 2
PKGS        ?= ./...
# Every process internal/testenv starts during `make unit` is recorded here;
# the run fails if one of them is still alive after the tests.
PIDS_DIR    := bin/test-pids

.PHONY: all deps build test vet fmt-check unit docs docs-check lint-examples alerts-check demo bench chaos clean

all: build

deps: $(NPM_DIR)/.installed
	@command -v redis-server >/dev/null && command -v redis-cli >/dev/null || { \
	  echo "deps: installing redis-server with apt"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq >/dev/null && apt-get install -y -qq redis-server >/dev/null; }
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || { \
	  echo "deps: installing prometheus (promtool, and the server the alert test runs) with apt"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq >/dev/null && apt-get install -y -qq prometheus >/dev/null; }
	@command -v node >/dev/null || { echo "deps: node is required (Node 20); install it with your package manager" >&2; exit 1; }
	@# Debian starts a system redis on 6379 when it installs the package; the
	@# tests use their own servers on free ports and need no system service.

$(NPM_DIR)/.installed: deps/package.json deps/package-lock.json
	@mkdir -p $(NPM_DIR)
	@cp deps/package.json deps/package-lock.json $(NPM_DIR)/
	@echo "deps: installing the Kinesis and DynamoDB emulators into $(NPM_DIR)"
	@cd $(NPM_DIR) && npm ci --no-audit --no-fund --silent
	@touch $@

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/connect-kinesis

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The tests use the binary `build` made (CONNECT_KINESIS_BIN) instead of
# linking their own. testreport prints go test's usual output, then the ten
# slowest tests and "N passed, N failed"; bin/test.json keeps the raw events.
# leftovers fails the run if a process the tests started is still alive.
unit: build
	@rm -rf $(PIDS_DIR) && mkdir -p $(PIDS_DIR)
	@$(GO) build -o bin/testreport ./internal/cmd/testreport && $(GO) build -o bin/leftovers ./internal/cmd/leftovers
	@set -o pipefail; status=0; \
	CONNECT_KINESIS_PIDS_DIR=$(abspath $(PIDS_DIR)) \
	CONNECT_KINESIS_BIN=$(abspath $(BIN)) \
	CONNECT_KINESIS_BIN_VERSION=$(VERSION) CONNECT_KINESIS_BIN_DATE=$(DATE) \
	  $(GO) test -json $(TEST_FLAGS) $(PKGS) 2>&1 | bin/testreport -o bin/test.json || status=1; \
	bin/leftovers $(PIDS_DIR) || status=1; \
	exit $$status

docs:
	$(GO) run ./internal/cmd/docgen

docs-check:
	$(GO) run ./internal/cmd/docgen -check

lint-examples: build
	$(BIN) lint config/examples/*.yaml

# The Prometheus alert rules live in config/alerts/, outside config/examples/,
# because they are Prometheus files, not Benthos pipelines.
alerts-check: deps
	promtool check rules config/alerts/kinesis.rules.yaml
	cd config/alerts && promtool test rules kinesis.rules_test.yaml

test: deps vet fmt-check docs-check lint-examples alerts-check unit

demo: deps build
	$(GO) run ./internal/cmd/demo -bin $(BIN)

bench: deps
	@for part in $(or $(PART),output ordered input lanes); do $(GO) run ./internal/cmd/bench $$part || exit 1; done

chaos: deps build
	$(GO) run ./internal/cmd/chaos -bin $(BIN)

clean:
	rm -rf bin
