"""The CI guide's steps, run locally the way a CI runner runs them: a fresh clone of a project repo, the
artifact cache restored, then every ``accelbuild`` step of examples/ci/github-actions.yml in order.

Every task must come from the cache, the checks must be evaluated, and the exit codes must be the
documented ones (0; 1 once a check fails)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import yaml

from conftest import REPO, run_cli

WORKFLOW = REPO / "examples" / "ci" / "github-actions.yml"


def accelbuild_steps(workflow: Path) -> list[str]:
    """The ``run:`` lines of the workflow that call accelbuild, in order."""
    jobs = yaml.safe_load(workflow.read_text())["jobs"]
    steps = [step["run"] for job in jobs.values() for step in job["steps"] if "run" in step]
    return [line for line in steps if line.startswith("accelbuild ")]


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@localhost", "GIT_COMMITTER_NAME": "ci",
                        "GIT_COMMITTER_EMAIL": "ci@localhost", "HOME": str(cwd), "PATH": "/usr/bin:/bin"})


def _run_step(line: str, cwd: Path):
    """One workflow line: its accelbuild arguments (the glob expanded as a shell would), stdout redirect."""
    args: list[str] = []
    for word in shlex.split(line.split(">")[0])[1:]:
        matches = sorted(cwd.glob(word)) if "*" in word else []
        if matches:
            args.extend(str(p.relative_to(cwd)) for p in matches)
        else:
            args.append(word)
    return run_cli(*args, cwd=cwd)


def test_the_ci_guide_from_a_fresh_clone_with_a_restored_cache(tmp_path: Path) -> None:
    steps = accelbuild_steps(WORKFLOW)
    assert [s.split()[1] for s in steps] == ["validate", "status", "run", "cache"]
    origin = tmp_path / "origin"
    shutil.copytree(REPO / "examples" / "models", origin / "models")
    (origin / "pipelines").mkdir()
    for name in ("tinydet.yaml", "sweep.yaml"):
        text = (REPO / "pipelines" / name).read_text().replace("../examples/models/", "../models/")
        (origin / "pipelines" / name).write_text(text)
    _git("init", "-q", cwd=origin)
    _git("add", "-A", cwd=origin)
    _git("commit", "-q", "-m", "pipelines", cwd=origin)

    first = tmp_path / "runner1"  # an earlier CI run fills the cache
    _git("clone", "-q", str(origin), str(first), cwd=tmp_path)
    results = [_run_step(step, first) for step in steps]
    assert [r.code for r in results] == [0, 0, 0, 0], [r.stderr for r in results]

    fresh = tmp_path / "runner2"  # a new runner: a fresh clone and the restored cache, nothing else
    _git("clone", "-q", str(origin), str(fresh), cwd=tmp_path)
    shutil.copytree(first / ".accelbuild" / "cache", fresh / ".accelbuild" / "cache")
    validate, status, run, gc = [_run_step(step, fresh) for step in steps]
    assert validate.code == 0 and status.code == 0
    assert status.stdout and all(line.startswith(("cached ", "              ")) for line in status.stdout.splitlines())
    assert run.code == 0, run.stderr
    summary = json.loads(run.stdout)
    assert {t["status"] for t in summary["tasks"]} == {"cached"}, [t["name"] for t in summary["tasks"] if t["status"] != "cached"]
    checked = [p for p in summary["pipelines"] if p["checks"]]
    assert len(checked) == 6 and all(c["ok"] for p in checked for c in p["checks"])  # the sweep's checks
    assert gc.code == 0

    sweep = fresh / "pipelines" / "sweep.yaml"
    sweep.write_text(sweep.read_text().replace("min_cosine: 0.98", "min_cosine: 0.99999"))
    failed = _run_step(steps[2], fresh)
    assert failed.code == 1 and "FAILED" in failed.stderr
    assert {t["status"] for t in json.loads(failed.stdout)["tasks"]} == {"up-to-date"}


def _project(origin: Path) -> None:
    shutil.copytree(REPO / "examples" / "models", origin / "models")
    (origin / "pipelines").mkdir()
    for name in ("tinydet.yaml", "sweep.yaml"):
        text = (REPO / "pipelines" / name).read_text().replace("../examples/models/", "../models/")
        (origin / "pipelines" / name).write_text(text)


def _two_layer_model(path: Path, width: int) -> None:
    """Two dense layers of width x width weights: more than one MX3 chip holds at 8 bits when width is 2,400."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal((width, width)) * 0.01).astype(np.float32), f"w{i}")
               for i in range(2)]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"], name="fc0"), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w1"], ["y"], name="fc1")]
    graph = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)]), path)


def test_the_recipe_builds_every_other_variant_when_one_fails_and_names_it(tmp_path: Path) -> None:
    """docs/ci.md's run step, as written, in a fresh clone: a matrix variant whose checks fail does not stop
    the others; too few chips for a variant's weights is refused by the validate step, before anything builds;
    a variant whose build fails (too few chips, found at map) does not stop the others either; the run exits
    non-zero and its last lines name every failure."""
    run_step = accelbuild_steps(WORKFLOW)[2]
    assert "--keep-going" in run_step and run_step in (REPO / "docs" / "ci.md").read_text()
    origin = tmp_path / "origin"
    _project(origin)
    sweep = origin / "pipelines" / "sweep.yaml"
    sweep.write_text(sweep.read_text().replace("target.num_chips: [1, 2, 4]", "target.num_chips: [1, 2]")
                     .replace("min_cosine: 0.98", "min_cosine: 0.995"))  # weight_bits=4 variants: 0.9918
    _git("init", "-q", cwd=origin)
    _git("add", "-A", cwd=origin)
    _git("commit", "-q", "-m", "pipelines", cwd=origin)
    clone = tmp_path / "runner"
    _git("clone", "-q", str(origin), str(clone), cwd=tmp_path)

    result = _run_step(run_step, clone)
    assert result.code == 1, result.stderr
    summary = json.loads(result.stdout)
    assert {t["status"] for t in summary["tasks"]} <= {"ran", "cached"} and summary["ok"] is False
    closing = result.stderr.strip().splitlines()[-1]
    failing = sorted(p["name"] for p in summary["pipelines"] if not all(c["ok"] for c in p["checks"]))
    assert failing == ["tinydet-sweep[num_chips=1,weight_bits=4]", "tinydet-sweep[num_chips=2,weight_bits=4]"]
    assert "2 check(s) failed" in closing
    named = result.stderr.strip().splitlines()[-2]
    assert named.startswith("accelbuild: failed:") and all(name in named for name in failing)

    _two_layer_model(clone / "models" / "wide.onnx", 2400)
    wide = "accelbuild: 1\nname: wide\nmatrix:\n  target.num_chips: [1, 2]\nmodels:\n  - path: ../models/wide.onnx\n"
    (clone / "pipelines" / "wide.yaml").write_text(wide + "checks:\n  max_chips: 2\n")
    # too few chips for the weights: the validate step says so before anything builds
    validate = _run_step(accelbuild_steps(WORKFLOW)[0], clone)
    assert validate.code == 2 and validate.stderr.startswith("pipelines/wide.yaml:4:22: num_chips is 1, but the "
                                                             "models' weights need at least 2 mx3 chips")
    # a crop may cut weights off, so load does not count them: the variant's build fails at map instead
    (clone / "pipelines" / "wide.yaml").write_text(wide + "    crop: {outputs: [y]}\nchecks:\n  max_chips: 2\n")
    again = _run_step(run_step, clone)
    statuses = {t["name"]: t["status"] for t in json.loads(again.stdout)["tasks"]}
    assert statuses["wide[num_chips=1]:map"] == "failed" and statuses["wide[num_chips=2]:benchmark"] == "ran"
    assert again.code == 2  # the failed task is a config mistake (num_chips), positioned in the YAML
    lines = again.stderr.strip().splitlines()
    assert "wide[num_chips=1]:map" in lines[-2] and "wide[num_chips=1] (not checked: its build failed)" in lines[-2]
    assert "checks passed" not in lines[-1] and "1 failed" in lines[-1]
