# Long runs of the reliability harness; the README's test command runs each
# scenario briefly. DURATION is how long each scenario injects faults,
# SEED replays a run's schedule (every run prints its seed).
DURATION ?= 10m
SEED ?=

.PHONY: torture
torture:
	scripts/install
	TERN_TORTURE_DURATION=$(DURATION) TERN_SEED=$(SEED) TERN_TORTURE_JSON=$(CURDIR)/torture.jsonl \
		go test -count=1 -timeout 0 -v -run '^TestTorture' ./test/e2e
