# connect-kinesis: Kinesis Data Streams for Benthos.
#
#   make demo   run a real pipeline against a local emulator and Redis
#   make test   everything: vet, format, unit and integration tests, docs, examples
#   make image  the container image (podman or buildah), FROM scratch
#   make release  dist/: archives for linux and darwin, amd64 and arm64
#   make test-image, make test-release  build those and test them (CI runs both)
#
# `make deps` installs what `make test` needs: redis-server and prometheus
# (promtool, and the server the alert test runs) from apt, the Kinesis and
# DynamoDB emulators from npm into .deps/npm. Each target installs only what
# it needs (deps-redis, deps-emulators, deps-prometheus): `make demo` needs
# no prometheus. apt runs only as root; anyone else is told the command to
# run (sudo on Debian, Homebrew on macOS).

SHELL       := /usr/bin/env bash
GO          ?= go
BIN         := bin/connect-kinesis
# The same binary with the `e2ehook` build tag, for the end-to-end tests
# that hold a hand-over (internal/consumer/reader/e2ehook.go); never
# released.
E2E_BIN     := bin/connect-kinesis-e2ehook
# VERSION comes from CHANGELOG.md (docs/releasing.md): RELEASE is its newest
# released heading (`## [0.9.0] - date`). A build of the commit tagged
# v$(RELEASE), with no uncommitted changes, is that release: 0.9.0. Any other
# build is a pre-release of the next patch, 0.9.1-dev.<N>.g<commit>[.dirty],
# N the commits since the release (its tag, else the commit that added its
# heading): it sorts above 0.9.0 and below 0.9.1 by semver, later commits
# above earlier ones, and it is a valid OCI image tag (no `+`). It names the
# release archives and the image tag, and `--version` prints it.
RELEASE     := $(shell sed -n 's/^\#\# \[\([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)\].*/\1/p' CHANGELOG.md 2>/dev/null | head -1)
COMMIT      := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# Computed once (a recursive ?= would run git at every use); `make
# VERSION=x` or VERSION in the environment still wins.
ifndef VERSION
VERSION     := $(shell \
  rel='$(RELEASE)'; [ -n "$$rel" ] || { echo 0.0.0-unknown; exit; }; \
  next=$$(echo "$$rel" | awk -F. '{ print $$1 "." $$2 "." $$3 + 1 }'); \
  head=$$(git rev-parse HEAD 2>/dev/null) || { echo "$$next-dev"; exit; }; \
  dirty=; git diff --quiet HEAD 2>/dev/null || dirty=.dirty; \
  base=$$(git rev-parse -q --verify "refs/tags/v$$rel^{commit}" 2>/dev/null || git log --format=%H -S"[$$rel] - " -- CHANGELOG.md 2>/dev/null | tail -1); \
  if [ "$$base" = "$$head" ] && [ -z "$$dirty" ] && git rev-parse -q --verify "refs/tags/v$$rel" >/dev/null; then echo "$$rel"; exit; fi; \
  n=$$( [ -n "$$base" ] && git rev-list --count "$$base..HEAD" || git rev-list --count HEAD); \
  echo "$$next-dev.$$n.g$$(git rev-parse --short=12 HEAD)$$dirty")
endif
# DATE: the commit's time in UTC, so that `make release` builds the same
# archives from the same commit whenever it runs (the build's own time made
# every binary, and so every archive, differ). Without git, the time now.
DATE        := $(or $(shell TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null),$(shell date -u +%Y-%m-%dT%H:%M:%SZ))
LDFLAGS     := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.dateBuilt=$(DATE)
# No cgo anywhere: one static binary that runs in a FROM scratch image and
# on any Linux, and cross-compiles without a C toolchain. -trimpath keeps
# the build machine's paths out of it.
GOBUILD     := CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)"
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

# The image `make image` tags, as config/deploy/kubernetes.yaml names it.
IMAGE       := localhost/connect-kinesis
IMAGE_CTX   := bin/image
SOURCE_URL  := https://github.com/connect-kinesis/connect-kinesis
# podman, else buildah (both build from the Containerfile with the same
# flags); `image-deps` installs podman when neither is there.
CONTAINER   ?= $(or $(shell command -v podman 2>/dev/null),$(shell command -v buildah 2>/dev/null),podman)
DIST        := dist
PLATFORMS   := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: deps-redis deps-emulators deps-prometheus
.PHONY: all version deps build build-e2ehook test vet fmt-check unit suite-norace docs docs-check lint-examples alerts-check demo bench chaos clean \
	image-deps image test-image release test-release

all: build

# Prints the version this checkout builds (see VERSION above).
version:
	@echo $(VERSION)

# apt_install,<apt packages>,<what needs them>,<Homebrew formula>: installs
# with apt-get as root; otherwise stops and names the command to run, since
# apt-get as a user fails on its lock file.
apt_install = { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "deps: installing $(1) with apt ($(2))"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq >/dev/null && apt-get install -y -qq $(1) >/dev/null; \
	  elif command -v apt-get >/dev/null; then \
	    echo "deps: $(2) needs $(1); install it as root, e.g. sudo apt-get install -y $(1), then run make again" >&2; exit 1; \
	  else \
	    echo "deps: $(2) needs $(1); on macOS: brew install $(3); elsewhere, your package manager; then run make again" >&2; exit 1; \
	  fi; }

deps: deps-redis deps-emulators deps-prometheus

deps-redis:
	@command -v redis-server >/dev/null && command -v redis-cli >/dev/null || $(call apt_install,redis-server,redis-server and redis-cli,redis)
	@# Debian starts a system redis on 6379 when it installs the package; the
	@# tests use their own servers on free ports and need no system service.

deps-prometheus:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || $(call apt_install,prometheus,promtool and the alert test,prometheus)

deps-emulators: $(NPM_DIR)/.installed

$(NPM_DIR)/.installed: deps/package.json deps/package-lock.json
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "deps: the emulators need node (20) and npm; install them with your package manager (apt-get install nodejs npm, brew install node), then run make again" >&2; exit 1; }
	@mkdir -p $(NPM_DIR)
	@cp deps/package.json deps/package-lock.json $(NPM_DIR)/
	@echo "deps: installing the Kinesis and DynamoDB emulators into $(NPM_DIR)"
	@cd $(NPM_DIR) && npm ci --no-audit --no-fund --silent
	@touch $@

build:
	$(GOBUILD) -o $(BIN) ./cmd/connect-kinesis

build-e2ehook:
	$(GOBUILD) -tags e2ehook -o $(E2E_BIN) ./cmd/connect-kinesis

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The tests use the binary `build` made (CONNECT_KINESIS_BIN) instead of
# linking their own, and the one `build-e2ehook` made
# (CONNECT_KINESIS_E2EHOOK_BIN) where they hold a hand-over. testreport prints go test's usual output, then the ten
# slowest tests and "N passed, N failed"; bin/test.json keeps the raw events.
# leftovers fails the run if a process the tests started is still alive.
unit: build build-e2ehook
	@rm -rf $(PIDS_DIR) && mkdir -p $(PIDS_DIR)
	@$(GO) build -o bin/testreport ./internal/cmd/testreport && $(GO) build -o bin/leftovers ./internal/cmd/leftovers
	@set -o pipefail; status=0; \
	CONNECT_KINESIS_PIDS_DIR=$(abspath $(PIDS_DIR)) \
	CONNECT_KINESIS_BIN=$(abspath $(BIN)) CONNECT_KINESIS_E2EHOOK_BIN=$(abspath $(E2E_BIN)) \
	CONNECT_KINESIS_BIN_VERSION=$(VERSION) CONNECT_KINESIS_BIN_DATE=$(DATE) \
	  $(GO) test -json $(TEST_FLAGS) $(PKGS) 2>&1 | bin/testreport -o bin/test.json || status=1; \
	bin/leftovers $(PIDS_DIR) || status=1; \
	exit $$status

docs:
	$(GO) run ./internal/cmd/docgen

docs-check:
	$(GO) run ./internal/cmd/docgen -check -check-words

lint-examples: build
	$(BIN) lint config/examples/*.yaml

# The Prometheus alert rules live in config/alerts/, outside config/examples/,
# because they are Prometheus files, not Benthos pipelines.
alerts-check: deps-prometheus
	promtool check rules config/alerts/kinesis.rules.yaml
	cd config/alerts && promtool test rules kinesis.rules_test.yaml

# Benthos' connector suite once more without -race: one of its definitions
# races on its own state (plugins/input/benthos_suite_race_test.go), so
# only this run includes it.
suite-norace: deps-redis deps-emulators
	CI=$(CI) $(GO) test -count=1 -timeout 15m -run 'TestIntegrationBenthosConnectorSuite|TestDeadLetterWritesThroughAnOutputResource|TestIntegrationPoisonRecord|TestIntegrationDeadLetterExamplesReplay' ./plugins/input/

test: deps vet fmt-check docs-check lint-examples alerts-check suite-norace simulate-ci unit

# The deterministic simulation (docs/reliability.md, "The simulation"), at
# two layers. The store protocol: plugins/checkpointer's Store and its Lua
# scripts on an in-process Redis with a simulated clock, several instances,
# faults at every step. The consumer: several real Consumers (coordinator,
# readers, sources, byte budget) on the in-memory Kinesis and store, in
# testing/synctest's virtual time, under composed fault schedules.
# make simulate [LAYER=store|consumer] [SEED=n] [DURATION=d | SCHEDULES=n]
# [STEPS=n] runs batches of schedules of each layer (both unless LAYER) for
# DURATION (default 10m each), each batch with its own seed; a failure
# prints the shortest schedule found and the command that replays it (on
# the same build). Known defects of the store layer (simKnownDefects) fail
# here too; FIND='<kind>' fails on that known defect only, to find and
# shrink it.
SIM_PKG     := ./plugins/checkpointer/
SIM_RUN     := -count=1 -run '^TestSimulateStore$$' -v $(SIM_PKG) -args -rapid.nofailfile
CSIM_PKG    := ./internal/consumer/coordinator/
CSIM_RUN    := -count=1 -run '^TestSimulateConsumer$$' -v $(CSIM_PKG) -args -rapid.nofailfile
SIM_MUTANTS := commit-fencing commit-forwards take-live reseed-tie reseed-claim reseed-tie-claim mark-fencing close-fencing gate-parents tracker-contiguity budget-close budget-refused stop-removal
.PHONY: simulate simulate-ci simulate-mutants
simulate:
	$(if $(filter consumer,$(LAYER)),,$(GO) test -timeout 0 $(SIM_RUN) $(if $(FIND),-sim.find='$(FIND)',-sim.strict) $(if $(SEED),-sim.seed=$(SEED)) $(if $(STEPS),-sim.steps=$(STEPS)) \
	  $(if $(SCHEDULES),-sim.schedules=$(SCHEDULES),-sim.duration=$(or $(DURATION),10m)))
	$(if $(filter store,$(LAYER)),,set -o pipefail; $(GO) test -timeout 0 $(CSIM_RUN) $(if $(SEED),-sim.seed=$(SEED)) $(if $(STEPS),-sim.steps=$(STEPS)) \
	  $(if $(SCHEDULES),-sim.schedules=$(SCHEDULES),-sim.duration=$(or $(DURATION),10m)) | grep -v '\[rapid\] draw')

# The CI slice, without the race detector (`make unit` runs a few dozen
# schedules of each layer under it), from fixed seeds so that CI is
# reproducible (make simulate explores from the clock): 10,000 store
# schedules, split over SIM_PROCS processes (the machine's cores) with
# seeds SEED, SEED+1, ..., and 1,000 consumer schedules beside them. Each
# process prints its schedules per second, and on a failure the command
# that replays it alone.
SIM_PROCS ?= $(shell nproc 2>/dev/null || echo 2)
simulate-ci:
	@set -o pipefail; dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	$(GO) test -c -o "$$dir/store.test" $(SIM_PKG) && $(GO) test -c -o "$$dir/consumer.test" $(CSIM_PKG) || exit 1; \
	procs=$(SIM_PROCS); total=$(or $(SCHEDULES),10000); seed=$(or $(SEED),1); \
	for i in $$(seq 0 $$((procs - 1))); do \
	  n=$$(( total / procs + (i < total % procs ? 1 : 0) )); \
	  (cd $(SIM_PKG) && "$$dir/store.test" -test.run '^TestSimulateStore$$' -test.v -test.count=1 -test.timeout 25m -rapid.nofailfile -sim.schedules=$$n -sim.seed=$$((seed + i)) 2>&1 | grep -v '\[rapid\] draw' > "$$dir/store.$$i.out"; echo $$? > "$$dir/store.$$i.rc") & \
	done; \
	(cd $(CSIM_PKG) && "$$dir/consumer.test" -test.run '^TestSimulateConsumer$$' -test.v -test.count=1 -test.timeout 25m -rapid.nofailfile -sim.schedules=$(or $(CSCHEDULES),1000) -sim.seed=$$seed 2>&1 | grep -v '\[rapid\] draw' > "$$dir/consumer.out"; echo $$? > "$$dir/consumer.rc") & \
	wait; status=0; \
	for f in "$$dir"/store.*.out "$$dir"/consumer.out; do cat "$$f"; [ "$$(cat "$${f%.out}.rc")" = 0 ] || status=1; done; exit $$status

# Each guard of SIM_MUTANTS switched off in turn (the `mutant` build tag:
# plugins/checkpointer/mutant.go, and mutant.go of internal/consumer's
# coordinator, reader and budget): the simulation must catch every one,
# the store layer first, else the consumer layer. Known defects are
# tolerated here, so that only the mutant fails a run.
simulate-mutants:
	@$(GO) test -tags mutant -count=1 -run '^TestEachLuaMutantSwitchesOffItsOwnGuard$$' $(SIM_PKG) >/dev/null || { echo 'a mutant switches off no guard of its own: go test -tags mutant -run TestEachLuaMutantSwitchesOffItsOwnGuard $(SIM_PKG)'; exit 1; }
	@printf '%-20s %-7s %-9s %s\n' guard caught layer 'schedules to find it'; status=0; \
	for m in $(SIM_MUTANTS); do \
	  layer=store; out=$$(CONNECT_KINESIS_MUTANT=$$m $(GO) test -tags mutant -timeout 30m $(SIM_RUN) -sim.schedules=$(or $(SCHEDULES),2000) $(if $(SEED),-sim.seed=$(SEED)) 2>&1); \
	  n=$$(printf '%s\n' "$$out" | sed -n 's/.*first failure at schedule \([1-9][0-9]*\).*/\1/p' | head -1); \
	  if [ -z "$$n" ]; then \
	    layer=consumer; out=$$(CONNECT_KINESIS_MUTANT=$$m $(GO) test -tags mutant -timeout 30m $(CSIM_RUN) -sim.schedules=$(or $(SCHEDULES),2000) $(if $(SEED),-sim.seed=$(SEED)) 2>&1); \
	    n=$$(printf '%s\n' "$$out" | sed -n 's/.*first failure at schedule \([1-9][0-9]*\).*/\1/p' | head -1); \
	  fi; \
	  if [ -n "$$n" ]; then printf '%-20s %-7s %-9s %s\n' $$m yes $$layer $$n; else printf '%-20s %-7s %-9s %s\n' $$m no - -; status=1; fi; \
	done; exit $$status

demo: deps-redis deps-emulators build
	$(GO) run ./internal/cmd/demo -bin $(BIN)

# BENCH_ARGS are passed to each part, e.g. a small scale run:
# make bench PART=scale BENCH_ARGS='-shards 400 -procs 4 -streams 4'
bench: deps-redis deps-emulators
	@for part in $(or $(PART),output ordered input lanes); do $(GO) run ./internal/cmd/bench $$part $(BENCH_ARGS) || exit 1; done

chaos: deps-redis deps-emulators build
	$(GO) run ./internal/cmd/chaos -bin $(BIN)

# The seeded soak (docs/reliability.md, "The soak"): make soak SEED=N
# DURATION=D [FAULTS=-class,...]; the same seed and build replay a run.
.PHONY: soak
soak: deps build
	$(GO) run ./internal/cmd/soak -bin $(BIN) $(if $(SEED),-seed $(SEED)) -duration $(or $(DURATION),10m) $(if $(FAULTS),-faults=$(FAULTS))

clean:
	rm -rf bin $(DIST)

image-deps:
	@command -v podman >/dev/null || command -v buildah >/dev/null || $(call apt_install,podman,make image,podman)
	@test -f /etc/ssl/certs/ca-certificates.crt || $(call apt_install,ca-certificates,make image,ca-certificates)

# The image holds only what $(IMAGE_CTX) holds (see config/deploy/Containerfile):
# building it copies a few files, no base image is pulled.
image: build image-deps
	@rm -rf $(IMAGE_CTX) && mkdir -p $(IMAGE_CTX)/etc/ssl/certs
	@cp $(BIN) $(IMAGE_CTX)/connect-kinesis
	@cp /etc/ssl/certs/ca-certificates.crt $(IMAGE_CTX)/etc/ssl/certs/
	@cp config/deploy/image/passwd config/deploy/image/group $(IMAGE_CTX)/etc/
	$(CONTAINER) build -f config/deploy/Containerfile \
	  --build-arg VERSION=$(VERSION) --build-arg REVISION=$(COMMIT) \
	  --build-arg CREATED=$(DATE) --build-arg SOURCE=$(SOURCE_URL) \
	  -t $(IMAGE):$(VERSION) -t $(IMAGE):latest $(IMAGE_CTX)

# Runs the image against the emulator and Redis (TestIntegrationImage in
# cmd/connect-kinesis; docs/testing.md says how it runs it). With CI=true a
# missing podman fails the test instead of skipping it.
test-image: deps-redis deps-emulators image
	CONNECT_KINESIS_BIN=$(abspath $(BIN)) \
	CONNECT_KINESIS_BIN_VERSION=$(VERSION) CONNECT_KINESIS_BIN_DATE=$(DATE) \
	CONNECT_KINESIS_IMAGE=$(IMAGE):$(VERSION) CONNECT_KINESIS_CONTAINER=$(CONTAINER) \
	  $(GO) test -race -count=1 -timeout 10m -run 'TestIntegrationImage' -v ./cmd/connect-kinesis

# dist/connect-kinesis_<version>_<os>_<arch>.tar.gz per platform, each with
# the binary, README.md, LICENSE and docs/ (the pages the binary's help and
# the README point at), and SHA256SUMS. Archives are
# reproducible for a commit: entries sorted, owned by root, dated by the
# commit.
release:
	@tag=$$(git describe --tags --exact-match 2>/dev/null); \
	if [ -n "$$tag" ] && [ "$$tag" != "v$(RELEASE)" ]; then \
	  echo "release: HEAD is tagged $$tag but CHANGELOG.md's newest release is $(RELEASE) (docs/releasing.md)" >&2; exit 1; fi
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; mtime=@$$(git log -1 --format=%ct 2>/dev/null || date +%s); \
	for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; name=connect-kinesis_$(VERSION)_$${os}_$${arch}; \
	  echo "release: $$name"; mkdir -p $(DIST)/$$name; \
	  GOOS=$$os GOARCH=$$arch $(GOBUILD) -o $(DIST)/$$name/connect-kinesis ./cmd/connect-kinesis; \
	  cp README.md LICENSE $(DIST)/$$name/; \
	  git ls-files -z docs | xargs -0 cp --parents -t $(DIST)/$$name/; \
	  tar -C $(DIST) --sort=name --owner=0 --group=0 --numeric-owner --mtime=$$mtime -czf $(DIST)/$$name.tar.gz $$name; \
	  rm -rf $(DIST)/$$name; \
	done
	cd $(DIST) && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS

# Checks every archive `release` wrote: its platform's binary (ELF or Mach-O,
# the right CPU, static, dated by the commit), README.md, LICENSE, docs/, and
# SHA256SUMS.
test-release: build release
	CONNECT_KINESIS_BIN=$(abspath $(BIN)) \
	CONNECT_KINESIS_BIN_VERSION=$(VERSION) CONNECT_KINESIS_BIN_DATE=$(DATE) \
	CONNECT_KINESIS_DIST=$(abspath $(DIST)) \
	  $(GO) test -race -count=1 -run 'TestReleaseArchives' -v ./cmd/connect-kinesis
