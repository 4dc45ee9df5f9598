# The two commands of the README.
#   make run    set up and serve the course at http://127.0.0.1:8000 (SQLite + embedded worker)
#   make test   set up what the tests need and run the whole suite (browser tests included)
.PHONY: run test bench

run:
	scripts/setup.sh
	.venv/bin/python -m app serve --host 127.0.0.1 --port 8000

test:
	scripts/setup.sh --test
	.venv/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

bench:
	scripts/setup.sh
	.venv/bin/python bench/lesson_throughput.py
