# One static binary; everything else is the Go toolchain and a few Debian
# packages (scripts/deps.sh).
export CGO_ENABLED := 0
GO ?= go

.PHONY: build deps demo demo-exec test bench vet clean

build:
	$(GO) build -trimpath -o bin/proctor ./cmd/proctor

deps:
	bash scripts/deps.sh

# The main job on the bundled examples: validate the example tasks, then run
# the honest agent and every cheating agent through `proctor run`.
demo: deps build
	bash examples/run/demo.sh $(CURDIR)/bin/proctor

# A tour of the sandbox runtime alone.
demo-exec: deps build
	bash examples/exec/demo.sh bin/proctor

# Isolation tests need root; as root none of them may be skipped under CI=true.
# One cache for every test package and both runs: the first digest of the
# host environment reads all of /usr. scripts/upstream.sh fetches the real
# upstream code the SWE-bench tests build instances from (once).
# The race pass leaves out internal/suite, whose tests drive whole suites
# through child proctor processes the race detector does not instrument,
# and internal/swebench, whose trials run the trial code the trial
# package's race pass covers: together 7 of its 15 minutes here.
test: export PROCTOR_TEST_CACHE := $(CURDIR)/.test-cache
test: deps
	bash scripts/upstream.sh $(PROCTOR_TEST_CACHE)/upstream
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 20m $$($(GO) list ./internal/... | grep -v -e /internal/suite$$ -e /internal/swebench$$)

bench: deps
	bash bench/startup.sh
	bash bench/trial.sh
	bash bench/audit.sh
	bash bench/suite.sh
	bash bench/image.sh

clean:
	rm -rf bin
