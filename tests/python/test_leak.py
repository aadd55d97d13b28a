"""No leak over 1,000 open/read/close cycles of a file, nor over repeated Model loads: the
process's open file descriptors and threads come back to where they were, no mapping of the file
is left, and the resident set stays within a small bound (after a warm-up, from /proc/self; a
handle leaked on purpose grows it by ~64 MiB over the 1,000 cycles)."""
import gc
import os

import numpy as np
import pytest

import cortiq

if not os.path.isdir("/proc/self/fd"):
    pytest.skip("needs /proc (Linux)", allow_module_level=True)


def fds():
    return len(os.listdir("/proc/self/fd"))


def threads():
    return len(os.listdir("/proc/self/task"))


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_open_close_1000(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "leak.cmf"
    cortiq.write(path, {"a": rng.standard_normal((64, 256)).astype(np.float32),
                        "q": rng.standard_normal((64, 256)).astype(np.float32)},
                 quant={"a": "f32", "q": "q4tp"})

    def cycle():
        with cortiq.open(path) as f:
            s = float(f.tensor("a")[0, 0]) + float(f.tensor("q")[0, 0])
            _ = f.header, f.tensors, f.masks
        return s

    for _ in range(50):  # warm-up: allocator pools, lazy imports
        cycle()
    gc.collect()
    fd0, rss0 = fds(), rss_kib()
    for _ in range(1000):
        cycle()
    gc.collect()
    assert fds() == fd0
    assert str(path) not in open("/proc/self/maps").read()  # every mapping released
    grown = rss_kib() - rss0
    assert grown < 4096, f"RSS grew by {grown} KiB over 1,000 cycles"


def test_views_release_the_mapping(tmp_path):
    path = tmp_path / "v.cmf"
    cortiq.write(path, {"a": np.ones((64, 64), np.float32)}, quant="f32")
    f = cortiq.open(path)
    v = f.tensor("a")
    f.close()
    maps = open("/proc/self/maps").read()
    assert str(path) in maps  # the view keeps the mapping
    del v, f
    gc.collect()
    assert str(path) not in open("/proc/self/maps").read()


def test_model_load_free_100(tiny_f32):
    def cycle():
        with cortiq.Model(tiny_f32, threads=2) as m:
            m.logits([1, 2, 3])
            "".join(m.generate([1, 2, 3], max_tokens=2, greedy=True))

    for _ in range(5):
        cycle()
    gc.collect()
    fd0, th0, rss0 = fds(), threads(), rss_kib()
    for _ in range(100):
        cycle()
    gc.collect()
    assert fds() == fd0 and threads() == th0
    grown = rss_kib() - rss0
    assert grown < 8192, f"RSS grew by {grown} KiB over 100 model loads"
