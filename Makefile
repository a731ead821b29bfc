# The README's two commands: `make demo` and `make test`. Plain `make` builds.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
export TANDEM_CACHE ?= $(CURDIR)/.cache
CMAKE_FLAGS ?=
ifdef CI
CMAKE_FLAGS += -DTDM_WERROR=ON
endif

.PHONY: all build deps data test test-asan demo clean

all: build

deps:
	@sh scripts/install-deps.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@MAKEFLAGS= cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# Test data: models, onnxruntime reference outputs, ONNX node tests (cached).
data:
	@sh scripts/models.sh
	@sh scripts/refs.sh
	@sh scripts/gen-node-tests.sh
	@sh scripts/gen-node-tests.sh 1.23

# The ASan+UBSan build (clang) with the fuzz targets; runs the whole suite.
test-asan:
	@CC=clang cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTDM_SANITIZE=ON -DTDM_FUZZ=ON $(CMAKE_FLAGS) >/dev/null
	@MAKEFLAGS= cmake --build $(ASAN_BUILD) -j $(JOBS) -- --no-print-directory
	@cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -LE noasan

# data before build: the configure step sees the data and then does not let
# the data-driven tests count a missing folder as skipped.
test: deps data build test-asan
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: deps build
	@sh scripts/models.sh
	@$(BUILD)/tandem plan $(TANDEM_CACHE)/models/ppocr_det.onnx --devices vnpu:edge-npu,cpu --shape x=1x3x640x640
	@echo
	@$(BUILD)/tandem run $(TANDEM_CACHE)/models/ppocr_det.onnx --devices vnpu:edge-npu,cpu --shape x=1x3x640x640 --random

# `make install` (PREFIX, default /usr/local; DESTDIR): libtandem.so and .a,
# the headers, tandem.pc, the CMake package (find_package(tandem)), the CLI,
# its man page and the Python package.
PREFIX ?= /usr/local
.PHONY: install
install:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	@MAKEFLAGS= cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD)

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
