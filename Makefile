# vigil's build. Every target works on a fresh machine with only Go installed: tools are pinned
# and fetched through the Go module proxy.

GO            ?= go
GOFLAGS       ?=
BIN_DIR       ?= bin
TEST_TIMEOUT  ?= 20m
# -race doubles build time and slows tests ~5x; CI keeps it on (it fits the budget).
RACE          ?= -race
# gotestsum runs go test and prints a line per package as it finishes, the failures again at
# the end, and the counts; pinned, fetched through the module proxy. Its exit status is go
# test's.
GOTESTSUM     ?= $(GO) run gotest.tools/gotestsum@v1.13.0
TEST_FORMAT   ?= pkgname-and-test-fails
# The build's identity, stamped into common/buildinfo (vigil --version, the log at start, the
# vigil_build_info metric).
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT        ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
BUILDINFO     := github.com/vigilhq/vigil/common/buildinfo
GO_LDFLAGS    ?= -X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Commit=$(COMMIT) -X $(BUILDINFO).Date=$(BUILD_DATE)

.PHONY: all build run test test-short metrics-doc cli-doc proto proto-check mocks mocks-check lint fmt tidy clean

all: build

build:
	@echo "== building $(BIN_DIR)/vigil (go build ./cmd/vigil; the first build compiles every dependency, a minute or two)"
	$(GO) build -ldflags "$(GO_LDFLAGS)" -o $(BIN_DIR)/vigil ./cmd/vigil

# Runs the server with its defaults (127.0.0.1:7233, data under ~/.local/share/vigil), logging
# for a person to read; ARGS="--log-format json" for JSON lines.
run: build
	@echo "== starting $(BIN_DIR)/vigil server start --log-format console $(ARGS) (Ctrl-C stops it)"
	./$(BIN_DIR)/vigil server start --log-format console $(ARGS)

test:
	@echo "== go test $(RACE) -count=1 -timeout $(TEST_TIMEOUT) ./... through gotestsum: one line per package as it finishes, counts at the end"
	$(GOTESTSUM) --format $(TEST_FORMAT) --format-hide-empty-pkg -- $(RACE) -count=1 -timeout $(TEST_TIMEOUT) ./...

test-short:
	@echo "== go test -short -count=1 ./... through gotestsum"
	$(GOTESTSUM) --format $(TEST_FORMAT) --format-hide-empty-pkg -- -short -count=1 ./...

# Rewrite the generated tables of docs/metrics.md and docs/configuration.md from the
# declarations (a test fails when either is stale).
metrics-doc:
	$(GO) run ./cmd/metricsdoc docs/metrics.md

.PHONY: config-doc docs bench
config-doc:
	$(GO) run ./cmd/configdoc docs/configuration.md

docs: metrics-doc config-doc

# Runs every scenario of BENCHMARKS.md (two hours or more; ARGS=--quick for a few minutes), raw
# outputs under bench-results/, and regenerates its tables.
bench:
	./bench/run.sh $(ARGS)

# Rewrites docs/cli.md's command reference from the command tree (a test fails when it is stale).
cli-doc:
	$(GO) run ./cmd/vigil docs docs/cli.md

# Regenerate protobuf code (under */gen/) and the Temporal import sources.
proto:
	@echo "== generating protobuf code (pinned buf, via go run)"
	./scripts/genproto.sh

# Fails if the committed generated code differs from what `make proto` produces.
proto-check: proto
	@git diff --exit-code -- '*.pb.go' 'proto/third_party' || \
		(echo "generated protobuf code is stale: run 'make proto' and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- '*.pb.go' 'proto/third_party')" || \
		(git status --porcelain -- '*.pb.go' 'proto/third_party' >&2; \
		 echo "untracked generated files: run 'make proto' and commit" >&2; exit 1)

mocks:
	@echo "== generating mocks (go generate -run mockgen)"
	$(GO) generate -run mockgen ./...

lint:
	@echo "== gofmt, go vet, staticcheck"
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags vigil_testhooks ./history/ ./server/
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@# tools/floor is a module of its own (its README says why).
	cd tools/floor && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

tidy:
	$(GO) mod tidy

clean:
	rm -rf $(BIN_DIR)

# Shipping (docs/deployment.md). GoReleaser is pinned in tools/release/go.mod, Helm and
# kubeconform in deploy/check/go.mod: neither is a dependency of vigil's module.
.PHONY: release-snapshot image package-check

# Release archives of the current commit for linux and darwin, amd64 and arm64, into dist/.
release-snapshot:
	@echo "== goreleaser release --snapshot (the first run compiles goreleaser, a few minutes)"
	@# GoReleaser reads the commit only when the clone names a remote (see deploy/package-check.sh).
	git remote get-url origin >/dev/null 2>&1 || export GIT_CONFIG_COUNT=1 \
		GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/vigilhq/vigil.git; \
	$(GO) tool -modfile=tools/release/go.mod goreleaser release --snapshot --clean

# The container image, with buildah (no daemon, nothing pulled); IMAGE_BINARY: a static linux
# binary to put in it instead of building one.
image:
	deploy/image/build.sh $(IMAGE_BINARY)

# Builds and checks the archives, the image, the Helm chart, the alerts and the compose file.
package-check:
	deploy/package-check.sh
