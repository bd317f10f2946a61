# LLM Inference at Scale — every target sets itself up: `make run` and `make test` work on a fresh clone.
PY      := .venv/bin/python
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup setup-vllm run test test-fast bench export check-exports edit slides gpu-record gpu-bundle gpu-dry-run clean \
        record engines record-times record-replay size

setup:            ## create .venv and install what the workshop needs (idempotent, fast when done)
	@bash scripts/setup.sh

setup-vllm:       ## .venv-vllm: vLLM's CPU build where this machine can run it (idempotent; says why not elsewhere)
	@bash scripts/setup-vllm.sh

run: setup setup-vllm ## run every notebook headless on the default profile: build/index.html + one HTML each
	$(PY) scripts/notebooks.py run

# pytest-xdist workers for the tests that do not drive a browser: one per core, at most 4 (each holds torch and
# transformers in memory); one torch thread in each, as torch's own threads would contend for the same cores.
# The browser tests run after them, alone: their waits are on a page's redraws.
JOBS ?= $(shell python3 -c 'import os; print(min(4, os.cpu_count() or 1))' 2>/dev/null || echo 1)
PARALLEL := OMP_NUM_THREADS=1 $(PY) -m pytest -n $(JOBS)

test: setup setup-vllm ## unit tests, every notebook in each regime (marimo) and in Jupyter (nbmake, replayed), browser tests; tiny profile, Hub off
	@bash scripts/setup-system.sh
	HF_HUB_OFFLINE=1 WORKSHOP_PROFILE=tiny $(PARALLEL) --dist loadscope tests -q -m "not browser" --durations=15
	HF_HUB_OFFLINE=1 WORKSHOP_PROFILE=tiny $(PY) -m pytest tests -q -m browser --durations=8
	HF_HUB_OFFLINE=1 WORKSHOP_PROFILE=tiny WORKSHOP_REPLAY=1 $(PARALLEL) notebooks/colab --nbmake --nbmake-timeout=900 -q --durations=11

test-fast: setup  ## unit tests only
	HF_HUB_OFFLINE=1 WORKSHOP_PROFILE=tiny $(PARALLEL) --dist loadscope tests -q -m "not slow and not browser"

bench: setup      ## measured figures as JSON under build/bench/ (not pass/fail)
	$(PY) scripts/bench.py

export: setup     ## regenerate notebooks/colab/*.ipynb from the marimo sources
	$(PY) scripts/notebooks.py export

check-exports: setup
	$(PY) scripts/notebooks.py check

edit: setup       ## open the notebooks interactively in marimo
	.venv/bin/marimo edit notebooks

clean:
	rm -rf build .pytest_cache

gpu-record:       ## on a CUDA GPU, no pip: notebooks 03, 05, 01, 02 (mistral-7b-random), bench, engines -> workshop/results/<gpu>/ (< 10 min)
	@bash scripts/gpu_record.sh $(RECORD_ARGS)

gpu-bundle:       ## the packages a bare GPU host lacks, for its Python 3.12 -> build/gpu-bundle-cp312.tar.xz (<= 24 MiB)
	@bash scripts/gpu_bundle.sh

gpu-dry-run:      ## the bare GPU host imitated here (torch + its packages, no index, no network) + the record, tiny profile
	@bash scripts/gpu_dry_run.sh

slides: setup     ## the deck: slides/deck.md + figures and numbers from helpers -> build/slides/index.html (offline)
	$(PY) slides/figures.py
	$(PY) slides/build.py

record: setup     ## the notebooks' measurements on whatever device is here -> workshop/results/<device>/ (GPU: make gpu-record)
	RECORD_ANY_DEVICE=1 bash scripts/gpu_record.sh

engines: setup setup-vllm ## servebench: every serving configuration here (transformers serve, vLLM; SGLang on a GPU), repeated, the load noted -> build/engines/engines.json
	HF_HUB_OFFLINE=$${HF_HUB_OFFLINE:-1} $(PY) -m servebench record --out build/engines/engines.json

record-times: setup  ## the guide's run times: make run twice on the default profile (nothing cached, then cached)
	$(PY) scripts/record_room.py times

record-replay: setup ## replay mode's recordings: every long measurement of make run saved (helpers.present.replay)
	$(PY) scripts/record_room.py replay


size:             ## what a learner reads: helpers/'s lines, each notebook's import closure; servebench/, scripts/ and the total -> build/size.json
	@mkdir -p build && python3 scripts/size.py --json > build/size.json && python3 scripts/size.py
	@python3 scripts/prose_words.py || true
