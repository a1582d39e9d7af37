GO ?= go

.PHONY: test demo bench lint sim

# test: every test, with the race detector, plus vet and gofmt.
test: lint
	$(GO) test -race -count=1 ./...

# demo: the verbs on a real file.
demo:
	$(GO) run ./examples/quickstart

# bench: each verb beside a naive prepared-statement baseline.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./state/

# lint: gofmt and go vet must be clean.
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

# sim: 1000 seeds of the deterministic simulator, one worker process per core.
sim:
	$(GO) run ./cmd/statesim -seeds 1000
