# vigil's build. Every target works on a fresh machine with only Go installed: tools are pinned
# and fetched through the Go module proxy.

GO            ?= go
GOFLAGS       ?=
BIN_DIR       ?= bin
TEST_TIMEOUT  ?= 20m
# -race doubles build time and slows tests ~5x; CI keeps it on (it fits the budget).
RACE          ?= -race

.PHONY: all build run test test-short proto proto-check mocks mocks-check lint fmt tidy clean

all: build

build:
	$(GO) build -o $(BIN_DIR)/vigil ./cmd/vigil

# Runs the server with its defaults (127.0.0.1:7233, data under ~/.local/share/vigil).
run: build
	./$(BIN_DIR)/vigil server start $(ARGS)

test:
	$(GO) test $(RACE) -count=1 -timeout $(TEST_TIMEOUT) ./...

test-short:
	$(GO) test -short -count=1 ./...

# Regenerate protobuf code (under */gen/) and the Temporal import sources.
proto:
	./scripts/genproto.sh

# Fails if the committed generated code differs from what `make proto` produces.
proto-check: proto
	@git diff --exit-code -- '*.pb.go' 'proto/third_party' || \
		(echo "generated protobuf code is stale: run 'make proto' and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- '*.pb.go' 'proto/third_party')" || \
		(git status --porcelain -- '*.pb.go' 'proto/third_party' >&2; \
		 echo "untracked generated files: run 'make proto' and commit" >&2; exit 1)

mocks:
	$(GO) generate -run mockgen ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

tidy:
	$(GO) mod tidy

clean:
	rm -rf $(BIN_DIR)
