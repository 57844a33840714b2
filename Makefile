# Bedrock — see README.md. `make test` is what CI runs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

NODE_MODULES_STAMP := node_modules/.package-lock.json

help: ## List the targets
	@grep -hE '^[a-z][a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-24s %s\n", $$1, $$2}'

$(NODE_MODULES_STAMP): package.json package-lock.json
	npm ci

setup: $(NODE_MODULES_STAMP) ## Install dependencies (npm ci), generate the protobuf code, build native helpers
	npm run gen
	npm run build

gen: ## Generate TypeScript from proto/ with buf (local protoc-gen-es)
	npm run gen

services: ## Start PostgreSQL and Redis, install Chromium for the UI tests, kubectl for the manifests, btrfs-progs for the workspaces and Patroni and etcd for the failover tests (each only if missing)
	bash scripts/ensure-services.sh
	bash scripts/ensure-patroni.sh
	bash scripts/ensure-btrfs.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-kubectl.sh

lint: setup ## buf lint, prettier --check, eslint (pure-core and layering rules) and tsc --noEmit
	npx buf lint
	npx prettier --check --log-level warn .
	npx eslint .
	npx tsc --noEmit -p tsconfig.json
	npx tsc --noEmit -p services/web-bff/ui/tsconfig.json

format: ## Format the code with Prettier (make lint checks it)
	npx prettier --write --log-level warn .

breaking: setup ## buf breaking against main
	npx buf breaking --against '.git#branch=main'

test: setup services lint ## Every suite; ends with "N passed, N failed"
	bash scripts/test.sh

bench: setup services ## Benchmarks: figures and ratios, no assertions (BENCH=name to pick some)
	npx tsx bench/run.ts $(BENCH)

cluster: setup services ## Start 2 conversation, 2 gateway, 3 tool-runner and 1 web-bff processes (logs in .bedrock/cluster/logs); PG=ha: on a Patroni cluster of 2 synchronous nodes; REDIS=cluster: on a local Redis Cluster (3+3)
	BEDROCK_CLUSTER_PG=$(or $(PG),single) BEDROCK_CLUSTER_REDIS=$(or $(REDIS),single) npx tsx scripts/cluster.ts up

loadtest: setup services ## Ramp synthetic conversations through a local cluster until an objective breaks (ARGS="--max N --step 30s --report FILE"; docs/capacity.md)
	npx tsx scripts/loadtest.ts $(ARGS)

cluster-down: ## Stop the local cluster
	npx tsx scripts/cluster.ts down

install-cli: setup ## Install the bedrock CLI globally from this checkout (npm package bedrock-agent; a link, see docs/cli.md)
	npm install -g ./apps/cli

bundles: setup ## Production bundles dist/<service>/main.js (what the images run)
	npx tsx scripts/bundle.ts

images: ## Build the four container images (needs a Docker engine; TAG=dev)
	for s in conversation llm-gateway tool-runner web-bff; do docker build -f services/$$s/Dockerfile -t bedrock/$$s:$(or $(TAG),dev) . || exit 1; done

k8s-render: setup ## Render (kubectl kustomize) and validate the manifests of an overlay (OVERLAY=dev|prod|prod-ha)
	bash scripts/ensure-kubectl.sh
	npm run render -w packages/deploy-check -- $(or $(OVERLAY),dev)

loadtest-tool-runner: setup ## Load-test a tool-runner it starts itself, or ARGS="--url URL --token-file F"; figures, --report FILE (docs/tool-runner.md)
	npx tsx services/tool-runner/bench/loadtest.ts $(ARGS)

.PHONY: help setup gen services lint format breaking test bench loadtest-tool-runner cluster cluster-down install-cli bundles images k8s-render
