# redrive — the README's commands. Each target installs what it needs first (scripts/setup).
.PHONY: help setup build demo test test-rust test-e2e bench lint fmt stop

help:
	@echo "make demo   set up what is missing, start Kafka + redrive with sample dead letters"
	@echo "make test   set up what is missing (Kafka, PostgreSQL, Chromium, ...), run every test"
	@echo "make build  release build: target/release/redrive serving target/site"
	@echo "make bench  benchmarks (ingest rate, list-page latency at 1M dead letters)"
	@echo "make lint   cargo fmt --check + clippy -D warnings"
	@echo "make stop   stop the development Kafka broker, PostgreSQL and the Schema Registry"

setup:
	scripts/setup

build: setup
	scripts/build-site release
	cargo build --release -p redrive

demo:
	scripts/demo

test:
	scripts/test

bench:
	scripts/bench

lint:
	scripts/setup --no-e2e
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

fmt:
	cargo fmt --all

stop:
	scripts/kafka stop
	scripts/postgres stop
	scripts/registry stop
