# The two entry points of the README: `make demo` (the main job) and `make test` (the whole
# suite). Both install missing Debian packages first. Everything else is a helper target.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc)

.PHONY: all deps build test test-asan test-tsan fuzz demo bench install clean format format-check

all: build

deps:
	@scripts/install-deps

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCORTIQ_SANITIZE=ON -DCORTIQ_BUILD_BENCH=OFF
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) -LE real

# The threaded parts under ThreadSanitizer: the server (its tests fail when the server exits
# with a report), the thread pool, batched decode, the template engine's threads.
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCORTIQ_TSAN=ON -DCORTIQ_BUILD_BENCH=OFF
	cmake --build $(TSAN_BUILD) -j$(JOBS)
	TSAN_OPTIONS=halt_on_error=1 ctest --test-dir $(TSAN_BUILD) --output-on-failure -j$(JOBS) -L server
	TSAN_OPTIONS=halt_on_error=1 ctest --test-dir $(TSAN_BUILD) --output-on-failure -j$(JOBS) \
	  -R 'test_pool|test_batch_decode|test_jinja_threads'

# Each libFuzzer target for FUZZ_SECONDS, starting from its committed corpus.
fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCORTIQ_FUZZ=ON -DCORTIQ_BUILD_BENCH=OFF \
	  -DCORTIQ_BUILD_TESTS=ON
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target $$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$$//')
	scripts/run-fuzzers $(FUZZ_BUILD) $(FUZZ_SECONDS)

demo: build
	scripts/demo $(BUILD)

bench: build
	$(BUILD)/bench/bench_open 10000
	$(BUILD)/bench/bench_verify 2 2

install: build
	cmake --install $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
