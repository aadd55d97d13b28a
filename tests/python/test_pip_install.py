"""`pip install ./python` makes a wheel with libcortiq inside that works without CORTIQ_LIB.

To stay fast and offline this packages the library CTest already built (CORTIQ_PREBUILT_LIB,
read by python/setup.py) into a fresh virtual environment that borrows numpy, cffi and
setuptools from the system (--system-site-packages, --no-build-isolation, --no-index); the full
path (setup.py running CMake itself) is the same code minus that variable, timed in
docs/PYTHON.md."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REF_CORPUS, ROOT


def test_pip_install_into_venv(tmp_path):
    lib = os.environ.get("CORTIQ_LIB")
    if not lib or not os.path.exists(lib):
        pytest.skip("no built libcortiq (CORTIQ_LIB)")
    venv = tmp_path / "venv"
    # --without-pip: pip and setuptools then come from the system too (the copies ensurepip
    # would put in the venv can be older than the build needs)
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                        str(venv)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"python3 -m venv unavailable: {r.stderr.strip()[-200:]}")
    py = venv / "bin" / "python"
    if subprocess.run([str(py), "-c", "import setuptools, pip, numpy, cffi"]).returncode != 0:
        pytest.skip("pip, setuptools, numpy or cffi missing from the system site-packages")
    # setuptools builds wheels itself from 70.1 on, before that only with the wheel package
    if subprocess.run([str(py), "-c", "import setuptools.command.bdist_wheel"],
                      capture_output=True).returncode != 0 and \
            subprocess.run([str(py), "-c", "import wheel"], capture_output=True).returncode != 0:
        pytest.skip("setuptools < 70.1 without the wheel package cannot build a wheel")
    src = tmp_path / "python"  # a copy: the build writes build/ and egg-info beside setup.py
    shutil.copytree(ROOT / "python", src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, CORTIQ_PREBUILT_LIB=lib, PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("CORTIQ_LIB")
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-deps", "--no-index", str(src)], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    env.pop("CORTIQ_PREBUILT_LIB")
    check = (
        "import cortiq, sys, numpy as np\n"
        "assert cortiq.library_path.startswith(sys.prefix), cortiq.library_path\n"
        f"f = cortiq.open({str(REF_CORPUS / 'llama.f16.cmf')!r})\n"
        "w = f.tensor('model.embed_tokens.weight')\n"
        "assert w.dtype == np.float16 and w.shape == (320, 64)\n"
        "print('ok', cortiq.library_path)\n")
    r = subprocess.run([str(py), "-c", check], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
