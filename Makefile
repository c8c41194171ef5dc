# HyperOps — see README.md. Every target works on a fresh Debian machine with Go.
GO        ?= go
CONFIG    ?= config/example.yaml
STATICCHECK_VERSION ?= v0.8.2
# Packages whose tests need nothing but Go (no redis-server, no control plane).
UNIT_PKGS ?= ./config/... ./ops ./ops/engine ./approvals/... ./handlers/... ./cmd/...

.PHONY: run playground test unit lint bench fuzz model stress e2e-tools deps build image clean

## run: start the bot with $(CONFIG) (embedded Redis unless redis.url is set); needs SLACK_APP_TOKEN and SLACK_BOT_TOKEN
run:
	$(GO) run ./cmd/hyperops run -config $(CONFIG)

## playground: try it in a browser: the real bot against a fake Slack, a fake AWS and a local control plane (built
## into .cache/bin on first use); prints the page's address (127.0.0.1:8090). Needs no Slack, AWS or cluster.
playground:
	$(GO) run ./cmd/hyperops playground

## build: the static binary in bin/hyperops
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/hyperops ./cmd/hyperops

## test: every test tier (unit, integration with real redis-server, end-to-end with a real control plane), with -race
test: deps e2e-tools
	$(GO) test -race -count=1 -timeout 60m ./...

## unit: the pure-logic tests only
unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

## lint: go vet and staticcheck
lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

## fuzz: each fuzz target for FUZZTIME (default 60s); their seed corpora (testdata/fuzz) run in every `go test`
FUZZTIME ?= 60s
FUZZ_TARGETS ?= ./handlers:FuzzSlashGrammar ./handlers:FuzzAgentRequest ./handlers:FuzzRender ./config:FuzzParse
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## model: the model-based test of the guards in combination (ops/state TestModel) for MODEL_CHECKS runs of about
## MODEL_STEPS steps each (default 1,000 × 100 = 100,000 steps, a few minutes); `go test ./ops/state` runs a short
## walk. A failure prints the shortest sequence found and the seed to replay it (-rapid.seed)
MODEL_CHECKS ?= 1000
MODEL_STEPS  ?= 100
model: deps
	bash -o pipefail -c "$(GO) test -count=1 -timeout 60m -run '^TestModel\$$' -v ./ops/state \
		-args -rapid.checks=$(MODEL_CHECKS) -rapid.steps=$(MODEL_STEPS) | grep -v '\[rapid\] draw\|model_test.go:[0-9]*: #'"

## bench: the performance targets of docs/architecture.md, printed as tables
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./bot/... ./ops/... ./internal/fakeslack/...

## stress: run PKG's tests N times (default 10) with every core also kept busy, and report passes and failures per
## test, e.g. `make stress PKG=./e2e/faults`; RUN narrows to some tests
N   ?= 10
PKG ?=
RUN ?=
stress: deps e2e-tools
	@test -n "$(PKG)" || { echo "usage: make stress PKG=./e2e/faults [N=10] [RUN=regexp]"; exit 2; }
	bash e2e/tools/stress.sh -n $(N) $(if $(RUN),-run '$(RUN)') $(PKG)

## e2e-tools: build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok into .cache/bin (once)
e2e-tools:
	bash e2e/tools/build.sh

## deps: install what the tests need that the machine lacks (redis-server, redis-sentinel, redis-cli; chromium for
## the playground's browser tests)
deps:
	@missing=; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-sentinel >/dev/null 2>&1 || missing="$$missing redis-sentinel"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	[ -z "$$missing" ] || { \
		echo "installing$$missing (apt-get)"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
		for b in redis-server redis-sentinel redis-cli chromium; do \
			command -v $$b >/dev/null || { echo "could not install $$b"; exit 1; }; done; }

## image: build the container image (needs a Docker engine)
image:
	docker build -t hyperops:$$(git describe --always --dirty 2>/dev/null || echo dev) .

clean:
	rm -rf bin
