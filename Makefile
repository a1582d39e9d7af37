GO ?= go

.PHONY: test demo bench bench-go lint sim stress stress-canary

# test: every test, with the race detector, after lint (gofmt, vet, staticcheck).
# The simulator's own seed runs are long under the race detector: there it
# runs its -short set (every regression seed and check, fewer clean seeds),
# then the full set without it. Its planted-bug canaries (TestCanaries) run
# once, without the race detector: they are the same runs in either set,
# and they test the checks, not the engine's concurrency, which the -short
# set runs under the race detector; under it they took 20 minutes of a
# 26-minute CI run on 2 cores (55 s without). Its runs go one at a time on one core (runs in one OS process
# must not overlap), so they run beside the other packages' tests, as two
# test processes (the canaries, and the rest), their output held until all
# are done; the target fails if any does.
# TEST_TIMEOUT is a cap for a busy machine, not a speed target.
TEST_TIMEOUT ?= 60m
SIMTEST = $(GO) test -race -short -count=1 -timeout $(TEST_TIMEOUT)
test: lint
	@command -v redis-server >/dev/null || echo "redis-server not found (.ci/run installs Debian's redis-server): every redisstate test that needs a server skips"
	@canaries=$$(mktemp); others=$$(mktemp); \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestCanaries$$' ./sim/ > $$canaries 2>&1 & c=$$!; \
	{ $(SIMTEST) -skip '^TestCanaries$$' ./sim/ && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -skip '^TestCanaries$$' ./sim/; } > $$others 2>&1 & o=$$!; \
	echo "sim: its canaries with $(GO) test; beside them $(GO) test -race -short, then $(GO) test, without the canaries; beside those:"; \
	echo "$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) (every package but sim)"; \
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v '/sim$$'); rest=$$?; \
	wait $$c; crc=$$?; wait $$o; orc=$$?; \
	echo "--- sim, its canaries, without the race detector:"; cat $$canaries; \
	echo "--- sim without its canaries, -race -short, then the whole set without the race detector:"; cat $$others; \
	rm -f $$canaries $$others; \
	test $$rest = 0 && test $$crc = 0 && test $$orc = 0

# demo: the verbs on a real file.
demo:
	$(GO) run ./examples/quickstart

# bench: every verb beside its naive baseline, interleaved in one run on one disk
# (cmd/statebench; table on stdout, JSON in statebench.json). A quick run:
#   make bench BENCHFLAGS='-benchtime 200ms -count 1 -rows 20000'
BENCHFLAGS ?=
bench:
	$(GO) run ./cmd/statebench $(BENCHFLAGS)

# bench-go: the go test benchmarks, for profiling.
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./state/

# lint: gofmt, go vet and staticcheck must be clean. staticcheck is pinned
# and fetched through the module proxy by go run, so only Go is needed.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# sim: 1000 seeds of the deterministic simulator, one worker process per core.
sim:
	$(GO) run ./cmd/statesim -seeds 1000

# stress: worker processes on the engine's default options (real clock, group
# commit, background sweep, flush and checkpoint; 4 goroutines each) share one
# file on disk and are SIGKILLed at random; every history is checked.
# Longer: make stress STRESS_FLAGS='-duration 5m -procs 8'
# The first mode (stepped clock, no background work): STRESS_FLAGS='-duration 60s -step-clock'
STRESS_FLAGS ?= -duration 60s
stress:
	$(GO) run ./cmd/statestress $(STRESS_FLAGS)

# stress-canary: the planted two-statement lease grant must be caught. The run
# lasts until 100 grants contended between processes (a 5-minute cap fails it)
# and passes only if it reports duplicate tokens.
stress-canary:
	$(GO) run ./cmd/statestress -bug lease-two-statements -until-contended 100 -duration 5m -expect duplicate-token
