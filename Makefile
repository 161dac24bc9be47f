# One entry point per job. Every target sets up what it needs first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: runtime setup demo serve bench bench-quick bench-economics bench-native-front test lint typecheck unit protos proto-check clean \
	clients-ts protos-ts clients-go protos-go clients-java clients-java-gen clients-java-gen-check helm grpcurl bench-adk-venv reliability \
	image base-image deploy-test

RUNTIME_STAMP := $(VENV)/.runtime

## The server and its runtime dependencies only (what serve and demo need).
$(RUNTIME_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME_STAMP)

## Plus the test, lint and benchmark tools (what test and bench need).
$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

runtime: $(RUNTIME_STAMP)

setup: $(STAMP)

## The main job on the embedded defaults.
demo: runtime
	$(BIN)/compaction-sidecar demo

## Run the server on the embedded defaults (SQLite file ./compaction.db, 127.0.0.1:50051,
## the offline extractive summarizer, or Gemini when GEMINI_API_KEY / GOOGLE_API_KEY is set).
serve: runtime
	$(BIN)/compaction-sidecar serve

ADK_VENV ?= .venv-adk
ADK_STAMP := $(ADK_VENV)/.installed

## google-adk in a venv of its own: the in-process baseline of `make bench`.
$(ADK_STAMP): bench/requirements-adk.txt
	$(PYTHON) -m venv $(ADK_VENV)
	$(ADK_VENV)/bin/pip install --quiet --upgrade pip==25.3
	$(ADK_VENV)/bin/pip install --quiet -r bench/requirements-adk.txt
	touch $(ADK_STAMP)

bench-adk-venv: $(ADK_STAMP)

## Benchmarks: each target measured against its baseline in the same run, as ratios
## (JSON in bench/results.json), then the plot in docs/bench.png.
bench: setup bench-adk-venv
	$(BIN)/python -m bench.run --json bench/results.json
	$(BIN)/python -m bench.plot bench/results.json --out docs/bench.png

bench-quick: setup bench-adk-venv
	$(BIN)/python -m bench.run --quick --json bench/results-quick.json

## What a native gRPC front end would buy (issue 37): grpc.aio's echo against grpc-go's, alone
## and handing every message to a Python process, as deployed (JSON in
## bench/results-native-front.json). Needs Go. make test runs its --quick mode.
bench-native-front: setup
	$(BIN)/python -m bench.native_front

## Context economics: τ-bench's airline runs, a long coding task and three synthetic transcripts
## through the real server under each policy (settings chosen on dev, reported on test), retention
## beside the bill under seven dated price models, against the peers (JSON in
## bench/results-economics.json, the plot in docs/economics.png, the tables of docs/economics.md
## regenerated).
## make test runs its --quick mode (tests/test_bench_economics.py).
bench-economics: setup
	$(BIN)/python -m bench.economics --jobs 2 --json bench/results-economics.json --plot docs/economics.png
	$(BIN)/python -m bench.economics.table bench/results-economics.json --page docs/economics.md

## Every check: lint, types, the proto contract, tests.
test: lint typecheck proto-check unit clients-ts clients-go clients-java-gen-check clients-java

NODE_STAMP := node_modules/.installed

$(NODE_STAMP): package.json package-lock.json
	npm ci --silent --no-audit --no-fund
	touch $(NODE_STAMP)

## buf lint (STANDARD) and the breaking-change check against the committed baseline.
proto-check: $(NODE_STAMP)
	npx buf lint
	npx buf breaking --against protos/baseline.json

## Regenerate the Python stubs in sidecar/gen from protos/.
protos: setup
	$(BIN)/python scripts/gen_protos.py

TS_DIR := clients/typescript
TS_STAMP := $(TS_DIR)/node_modules/.installed

$(TS_STAMP): $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --silent --no-audit --no-fund
	touch $(TS_STAMP)

## TypeScript client: strict build, generated-code staleness check, no import circles (dpdm), its tests and the
## conformance suite against a real server from .venv.
clients-ts: setup $(TS_STAMP)
	cd $(TS_DIR) && npm run check-gen && npm run check-cycles \
		&& SIDECAR_BIN=$(abspath $(BIN))/compaction-sidecar npm test

## Regenerate clients/typescript/src/gen from protos/.
protos-ts: $(TS_STAMP)
	cd $(TS_DIR) && npm run generate

## Go client: pinned plugins, stubs up to date, gofmt/vet, its tests and the conformance
## suite against a real server from .venv.
clients-go: setup $(NODE_STAMP)
	clients/go/scripts/check-gen.sh
	cd clients/go && test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }
	cd clients/go && go vet ./...
	cd clients/go && SIDECAR_BIN=$(abspath $(BIN))/compaction-sidecar go test -count=1 ./...

## Regenerate the Go stubs in clients/go/compactionv1 from protos/.
protos-go: $(NODE_STAMP)
	clients/go/scripts/gen.sh

## Java client: its tests and the conformance suite, each test class against a real server.
## Prints Surefire's summary lines (the whole log, .venv/mvn-test.log, when it fails).
clients-java: setup
	cd clients/java && SIDECAR_BIN=$(abspath $(BIN))/compaction-sidecar \
		mvn -B --no-transfer-progress -Dstyle.color=never test > $(abspath $(VENV))/mvn-test.log 2>&1; \
		status=$$?; grep -E 'Tests run:|BUILD|ERROR' $(abspath $(VENV))/mvn-test.log; \
		[ $$status -eq 0 ] || tail -n 150 $(abspath $(VENV))/mvn-test.log; exit $$status

## Regenerate clients/java/src/generated/java from protos/ (buf; protoc and grpc-java's
## protoc-gen-grpc-java from Maven Central, no root needed).
clients-java-gen: $(NODE_STAMP)
	clients/java/scripts/gen.sh

## Fail when the committed Java stubs are stale.
clients-java-gen-check: $(NODE_STAMP)
	clients/java/scripts/gen.sh --check

## ruff, then the import contracts of pyproject.toml: the package layers and no circles.
lint: setup
	$(BIN)/ruff check sidecar tests scripts bench
	$(BIN)/ruff format --check sidecar tests scripts bench
	$(BIN)/lint-imports --no-logo

typecheck: setup
	$(BIN)/mypy

## Faults and load, long mode: fuzz every RPC, 30 SIGKILLs under load, summarizer and
## full-disk faults, history checks; prints the figures for docs/reliability.md at the end.
## (make test runs the same suite in its quick mode.)
reliability: setup
	RELIABILITY=long $(BIN)/pytest -q -p no:cacheprovider -o faulthandler_timeout=1800 tests/reliability

## Helm v3.22.0 into .tools/bin, built through the Go module proxy (about three minutes
## the first time on a machine, instant once the pinned version is there).
helm:
	bash scripts/install_helm.sh

## grpcurl v1.9.3 into .tools/bin, built through the Go module proxy (a few minutes the
## first time on a machine): tests/docs runs the README's grpcurl lines as printed.
grpcurl:
	bash scripts/install_grpcurl.sh

## The tests on two pytest-xdist workers: the longest ones one after another on one of them,
## the rest on both (tests/conftest.py says which and why).
unit: setup helm grpcurl bench-adk-venv
	$(BIN)/pytest -q -n 2 --dist loadgroup

## The container image from the Dockerfile (docker, else podman, else buildah): the wheels
## built on the host into build/wheels, the build itself offline. BASE_IMAGE=... to change
## the base (python:3.11-slim-bookworm by default); prints the image's size.
image:
	bash scripts/deploy/image.sh

## A base for the image from Debian's packages (mmdebstrap), where no registry is reachable.
base-image:
	bash scripts/deploy/base_image.sh

## The image built and run, and the chart's pods run, with podman (installed with apt-get
## when missing): see scripts/deploy/deploy_test.py. Needs .venv (make setup or make test).
deploy-test: helm
	bash scripts/deploy/deploy_test.sh

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .import_linter_cache \
		$(TS_DIR)/node_modules $(TS_DIR)/dist
