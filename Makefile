# Sendstream: the operator interface (see README.md and shared DESIGN.md).
#   make run    install what is missing, start the local stack, serve on 127.0.0.1:8080
#   make test   everything the tests need, then every test (.ci/run calls it)
#   make build  bin/sendstream
#   make bench  the benchmarks in bench/, results as JSON under bench/results/

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
export GOFLAGS ?=

GO    ?= go
STACK := deploy/stack.sh
DATA  := $(or $(SENDSTREAM_DATA_DIR),.run)

# Loads the stack's settings (.run/stack.env) into the recipe's shell.
LOAD_ENV := set -a; . "$(DATA)/stack.env"; set +a

.PHONY: all build install up down run test test-race vet fmt bench clean-run

all: build

build:
	$(GO) build -o bin/sendstream .

install:
	@bash $(STACK) install

up: install build
	@bash $(STACK) up

down:
	@bash $(STACK) down

# Serves in the foreground. Postgres and ClickHouse are started unless they
# already run; `serve` starts (or reuses) its own broker process under
# $(DATA)/kafka because SENDSTREAM_KAFKA_BROKERS stays unset. Unless something
# already listens on 127.0.0.1:1025, `sendstream mailsink` takes the mail
# (inbox on http://127.0.0.1:1080, log in $(DATA)/mailsink.log). On exit or
# Ctrl-C the mail sink is stopped, and the databases too if this target
# started them; the data stays in $(DATA) for the next start.
run: install build
	@started=0; bash $(STACK) status || started=1; \
	cleanup=:; trap 'eval "$$cleanup"' EXIT; \
	bash $(STACK) up --no-broker; \
	if [[ $$started == 1 ]]; then cleanup='bash $(STACK) down'; fi; \
	if ! (: </dev/tcp/127.0.0.1/1025) 2>/dev/null; then \
		bin/sendstream mailsink --dir "$(DATA)/mail" >>"$(DATA)/mailsink.log" 2>&1 & \
		cleanup="kill $$! 2>/dev/null || true; wait $$! || true; $$cleanup"; \
	fi; \
	echo "Mail inbox: http://127.0.0.1:1080 (SMTP 127.0.0.1:1025)"; \
	set -a; . <(grep -E '^SENDSTREAM_(POSTGRES_URL|CLICKHOUSE_ADDR|CLICKHOUSE_DB)=' "$(DATA)/stack.env"); set +a; \
	bin/sendstream serve

# Every test runs once: the packages with concurrency (pipeline, ingest,
# stages, sinks) under the race detector, the rest without it. The tests
# that shrink their largest bodies under the detector (raceEnabled) run
# once more without it, at full size.
test: install build
	@bash $(STACK) up
	@$(LOAD_ENV); $(GO) vet ./...
	@$(LOAD_ENV); $(GO) test -count=1 -p 2 -timeout 20m -skip '^TestBadInputSuite$$' . ./bench/... ./deploy/... ./schemas/...
	@$(LOAD_ENV); $(GO) test -count=1 -timeout 10m -run '^TestLarge' ./ingest/events/ ./ingest/contacts/
	@# The bad-input suite on its own, verbose, so its count of tried inputs is printed.
	@$(LOAD_ENV); $(GO) test -count=1 -timeout 10m -run '^TestBadInputSuite$$' -v . | grep -v '^=== RUN'
	@$(LOAD_ENV); $(GO) test -count=1 -p 2 -race -timeout 20m ./pipeline/... ./ingest/... ./stages/... ./sinks/...

test-race: install build
	@bash $(STACK) up
	@$(LOAD_ENV); $(GO) test -count=1 -p 2 -race -timeout 20m ./pipeline/... ./ingest/... ./stages/... ./sinks/...

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w $$(git ls-files '*.go')

bench: install build
	@bash $(STACK) up
	@mkdir -p bench/results
	@$(LOAD_ENV); $(GO) run ./bench $(BENCH_ARGS)

clean-run:
	@bash $(STACK) clean
