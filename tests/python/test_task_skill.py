"""cortiq.Model(task=, skill=): the same logits as the CLI's `--task` / `--skill` on files grown by
`cortiq mask derive` (spec §5) and `cortiq skill add` (spec §9)."""
import subprocess

import numpy as np
import pytest

from conftest import ROOT, cortiq_bin

import cortiq

SKILLS = ROOT / "tests" / "fixtures" / "skills"
IDS = [1, 5, 9, 2, 7, 3, 11, 4]


def cli(*args):
    exe = cortiq_bin()
    if not exe:
        pytest.skip("the cortiq CLI is not built (CORTIQ_BIN)")
    subprocess.run([exe, *map(str, args)], check=True, capture_output=True)


def cli_logits(path, out, *opts):
    cli("logits", path, "--ids", ",".join(map(str, IDS)), "--exact", "--top", "0", "-o", out,
        *opts)
    return np.load(out)


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """The skills fixture's backbone at f32 with a derived task mask and the code skill."""
    d = tmp_path_factory.mktemp("grown")
    m = d / "m.cmf"
    cli("convert", "--model", SKILLS / "base", "--quant", "f32", "--output", m, "-q")
    cli("mask", "derive", m, "--calib", SKILLS / "code_calib.txt", "--heldout",
        SKILLS / "code_heldout.txt", "--keep", "0.5", "--name", "half")
    cli("skill", "add", m, "--id", "code", "--from", SKILLS / "code", "--calib",
        SKILLS / "code_calib.txt", "--heldout", SKILLS / "code_heldout.txt")
    return m


@pytest.mark.parametrize("task,skill", [("none", None), ("half", None), ("none", "code"),
                                        ("half", "code")])
def test_model_equals_cli(grown, tmp_path, task, skill):
    opts = ["--task", task] + (["--skill", skill] if skill else [])
    want = cli_logits(grown, tmp_path / "l.npy", *opts)
    with cortiq.Model(grown, threads=1, kv="f32", act="f32", task=task, skill=skill) as m:
        assert m.task == (None if task == "none" else task)
        got = m.logits(IDS)[-1]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_task_and_skill_change_the_result(grown):
    outs = {}
    for task, skill in [("none", None), ("half", None), ("none", "code")]:
        with cortiq.Model(grown, threads=1, kv="f32", act="f32", task=task, skill=skill) as m:
            outs[(task, skill)] = m.logits(IDS)[-1]
    dense = outs[("none", None)]
    assert np.abs(outs[("half", None)] - dense).max() > 1e-3
    assert np.abs(outs[("none", "code")] - dense).max() > 1e-3


def test_unknown_task_and_skill_raise(grown):
    with pytest.raises(cortiq.Error, match="half"):  # the message lists the file's tasks
        cortiq.Model(grown, threads=1, task="nope")
    with pytest.raises(cortiq.Error, match="code"):  # ... and its skills
        cortiq.Model(grown, threads=1, skill="nope")
