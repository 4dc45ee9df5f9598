# The two commands of the README.
#   make run    set up and serve the course at http://127.0.0.1:8000 (SQLite + embedded worker);
#               make run PORT=8123 HOST=0.0.0.0 serves elsewhere
#               (HOST=0.0.0.0 exposes it to the network: set COURSE_SECRET_KEY there)
#   make test   set up what the tests need, lint, and run the whole suite (browser tests included)
#   make test-quick   the quick loop for local work: no Chromium, Ray, PostgreSQL or minutes-long tests
#   make lint   ruff (lint + format check) and mypy over the tree
.PHONY: run test test-quick lint bench

HOST ?= 127.0.0.1
PORT ?= 8000
# pytest processes (pytest-xdist), each with its own databases, servers and browser; a test file stays in one,
# and so do all the tests of the Ray cluster (--dist loadgroup, tests/scheduling.py).
TEST_WORKERS ?= 2

run:
	scripts/setup.sh
	.venv/bin/python -m app serve --host $(HOST) --port $(PORT)

test:
	scripts/setup.sh --test
	$(MAKE) --no-print-directory lint
	.venv/bin/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --durations=15 $(PYTEST_ARGS)

# The tests that need none of the servers the suite starts and take seconds, not minutes (docs/testing.md);
# the markers follow from the fixtures a test uses (tests/conftest.py). PYTEST_ARGS narrows it further.
QUICK = not slow and not browser and not ray and not postgres
test-quick:
	@test -x .venv/bin/python || { echo "no .venv: run scripts/setup.sh --test (or make test) once first"; exit 2; }
	.venv/bin/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile -m "$(QUICK)" $(PYTEST_ARGS)

# Lint, format and types over the whole tree (make test runs this first).
lint:
	scripts/setup.sh --test
	.venv/bin/ruff check app labs tests bench migrations
	.venv/bin/ruff format --check app labs tests bench migrations
	.venv/bin/mypy
	.venv/bin/lint-imports  # the layer contracts in .importlinter

# Lesson-page throughput under wrk against a bare FastAPI endpoint measured in the same run.
bench:
	scripts/setup.sh --bench
	.venv/bin/python bench/lesson_throughput.py
