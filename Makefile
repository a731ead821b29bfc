# The README's two commands: `make demo` and `make test`. Plain `make` builds.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
export TANDEM_CACHE ?= $(CURDIR)/.cache
CMAKE_FLAGS ?=
ifdef CI
CMAKE_FLAGS += -DTDM_WERROR=ON
endif

.PHONY: all build deps deps-demo testenv data test test-asan demo clean

all: build

deps:
	@sh scripts/install-deps.sh test

deps-demo:
	@sh scripts/install-deps.sh demo

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@MAKEFLAGS= cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# Test data: models, onnxruntime reference outputs, ONNX node tests (cached).
data:
	@sh scripts/models.sh
	@sh scripts/refs.sh
	@sh scripts/gen-node-tests.sh
	@sh scripts/gen-node-tests.sh 1.23

# PoCL's kernel cache: every test pass starts from an empty one, so the
# cold path (LLVM compiling each kernel, as on a new machine) is what is
# tested every time; a warm ~/.cache/pocl would hide it. Removed afterwards.
POCL_FRESH = d=$$(mktemp -d "$${TMPDIR:-/tmp}/tandem-pocl.XXXXXX") && trap 'rm -rf "$$d"' EXIT && export POCL_CACHE_DIR="$$d"

# The ASan+UBSan build (clang) with the fuzz targets; runs the whole suite.
# Leaks inside LLVM, PoCL and the ICD loader are suppressed by a reviewed
# list that names those libraries only (tests/asan/lsan.supp; the OpenCL
# test sets it, see tests/backend-ops/CMakeLists.txt).
test-asan:
	@CC=clang cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTDM_SANITIZE=ON -DTDM_FUZZ=ON $(CMAKE_FLAGS) >/dev/null
	@MAKEFLAGS= cmake --build $(ASAN_BUILD) -j $(JOBS) -- --no-print-directory
	@$(POCL_FRESH) && cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -LE noasan

# The PyPI test environment (onnxruntime, onnx, numpy, pillow, pytest), and
# Triton's (PyTriton's tritonserver, tritonclient) for tests/triton.
testenv:
	@sh scripts/testenv.sh
	@sh scripts/testenv.sh triton

# data before build: the configure step sees the data and then does not let
# the data-driven tests count a missing folder as skipped.
test: deps testenv data build test-asan
	@$(POCL_FRESH) && cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The main job on a real input: a rendered page of text read by PP-OCRv4
# det -> boxes -> rec (examples/ocr, the public API only) on the RK3588
# profile with cpu behind it, then on cpu alone; the placement and fallback
# story, what the precision guard and rescue did, the text read; and
# report.html for the detector. Everything lands in $(TANDEM_CACHE)/demo.
DEMO = $(TANDEM_CACHE)/demo
demo: deps-demo build
	@sh scripts/models.sh ppocr_det ppocr_rec
	@mkdir -p $(DEMO)
	@/usr/bin/python3 examples/ocr/render_page.py $(DEMO)/page.ppm $(DEMO)/page.txt
	@$(BUILD)/tandem-ocr $(DEMO)/page.ppm $(TANDEM_CACHE)/models/ppocr_det.onnx \
	    $(TANDEM_CACHE)/models/ppocr_rec.onnx --devices vnpu:rk3588,cpu \
	    --expect $(DEMO)/page.txt --ledger-dir $(DEMO)
	@echo
	@$(BUILD)/tandem report $(TANDEM_CACHE)/models/ppocr_det.onnx --devices vnpu:rk3588,cpu \
	    --input x=$(DEMO)/det-input.npy --html $(DEMO)/report.html --iterations 2 >/dev/null
	@echo "demo: the detector's report is $(DEMO)/report.html (open it in a browser)"

# `make install` (PREFIX, default /usr/local; DESTDIR): libtandem.so and .a,
# the headers, tandem.pc, the CMake package (find_package(tandem)), the CLI,
# its man page and the Python package.
PREFIX ?= /usr/local
.PHONY: install
install:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	@MAKEFLAGS= cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
