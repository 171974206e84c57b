# Long runs of the reliability harness; the README's test command runs each
# scenario briefly. DURATION is how long each scenario injects faults,
# SEED replays a run's schedule (every run prints its seed).
DURATION ?= 10m
SEED ?=

.PHONY: install
# install puts tern into $(go env GOBIN), else $(go env GOPATH)/bin, as
# go install ./cmd/tern does, and says where, and whether that is on PATH.
install:
	go install ./cmd/tern
	@bin=$$(go env GOBIN); bin=$${bin:-$$(go env GOPATH)/bin}; \
	echo "installed $$bin/tern"; \
	case ":$$PATH:" in *":$$bin:"*) ;; *) echo "$$bin is not on your PATH: add it (export PATH=\"$$bin:\$$PATH\"), or run $$bin/tern";; esac

.PHONY: torture
torture:
	scripts/install
	TERN_TORTURE_DURATION=$(DURATION) TERN_SEED=$(SEED) TERN_TORTURE_JSON=$(CURDIR)/torture.jsonl \
		go test -count=1 -timeout 0 -v -run '^TestTorture' ./test/e2e
