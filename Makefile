# dlrack.node — the two commands: `make demo` and `make test`. See README.md.
SHELL := /bin/bash
VENV := $(CURDIR)/.venv
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.collections
export PYTHONDONTWRITEBYTECODE := 1
REPORT_DIR ?= reports/example
PYTEST_ARGS ?=

.PHONY: demo test venv test-deps lint unit molecule image clean bench mutate sanity units-ansible-test docs

venv:
	./scripts/bootstrap.sh

## make demo: set everything up and run the pre-flight on the bundled example fleet.
## The pre-flight prints the summary and the "reports:" line itself. A declared fleet is validated by
## one controller task run once, so Ansible's PLAY RECAP names one host: the note below says so.
demo: venv
	ansible-playbook playbooks/preflight.yml -i inventories/example \
	  -e dlrack_report_dir=$(REPORT_DIR) -e dlrack_fail_on=never
	@echo "make demo: every host's verdict is in the summary above and in the reports; Ansible's PLAY RECAP lists" \
	  "one host because a declared fleet is validated by one controller task, run once (no host is contacted)."

test-deps: venv
	./scripts/test-deps.sh

## make test: install what the tests need, then lint + unit + every molecule scenario, one pytest run
## (storage_vm in the background from the start: tests/molecule_runs.py); the 25 slowest tests are listed.
test: test-deps
	pytest -ra --durations=25 $(PYTEST_ARGS) tests

unit: venv
	pytest -ra -m "not molecule and not lint" $(PYTEST_ARGS) tests

lint: venv
	pytest -ra -m lint tests

molecule: test-deps
	pytest -ra -m molecule $(PYTEST_ARGS) tests

## make sanity: ansible-test sanity on a copy under .cache/sanity/ansible_collections/dlrack/node.
sanity: venv
	./scripts/sanity.sh $(SANITY_ARGS)

## ansible-test units on a copy in .cache/units (the whole of tests/unit, run the way collection CI runs them;
## make test runs the files that depend on the layout: tests/lint/test_units_ansible_test.py). SANITY_ARGS: targets.
units-ansible-test: venv
	./scripts/sanity.sh units $(SANITY_ARGS)

image:
	./scripts/build-image.sh

## make docs: rewrite the generated documentation: docs/roles.md (the roles' argument specs) and the rules
## and profiles tables of README.md and docs/dlrack_hw.md (the rule registry); unit tests fail when they are stale.
docs: venv
	python scripts/gen-role-docs.py
	python scripts/gen-rule-docs.py

bench: venv
	python benchmarks/run.py

## make mutate [FILE=plugins/plugin_utils/rules.py]: mutation testing with mutmut's operators (150 mutants
## per file, message strings left out) of rules.py, storage_plan.py and affinity.py; minutes per file, not in CI.
mutate: venv
	python -c "import mutmut" 2>/dev/null || pip install -q "mutmut==2.5.1"
	python scripts/mutate.py $(FILE)

clean:
	rm -rf reports .cache .pytest_cache
