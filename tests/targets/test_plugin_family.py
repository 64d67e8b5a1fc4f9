"""A family from outside accelbuild: a throwaway package written to a tmp folder with its own ``*.dist-info``
(METADATA, entry_points.txt), put on PYTHONPATH, and nothing changed in accelbuild. Its pipeline runs
through the CLI with its own target keys validated, its own stages (map: facts of quantized.onnx; assemble:
a program file; benchmark: figures from that program), its own check, and ``inspect``, ``bench``,
``compare`` and ``schema`` working through what it declares."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLE_MODELS, run_cli_process

TARGET_PY = '''
"""Family toy: a made-up accelerator that runs one operator per cycle on ``lanes`` lanes at 1 GHz."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbuild.families import ProgramFile
from accelbuild.stages.declaration import Stage, model_dir
from accelbuild.stages.params import PrecisionRules
from accelbuild.targets.base import TargetBase


@dataclass(frozen=True)
class ToySpec:
    family: str
    lanes: int


@dataclass(frozen=True)
class ToyParams:
    models: tuple[str, ...]
    lanes: int


@dataclass(frozen=True)
class NoParams:
    pass


def program_name(pipeline):
    return pipeline.base_name + ".toy"


def _quantized(pipeline, model):
    return {f"{m.name}/quantized.onnx": model_dir(pipeline, m) / "quantized.onnx" for m in pipeline.models}


def _params(pipeline, model):
    return ToyParams(tuple(m.name for m in pipeline.models), pipeline.target.lanes)


class ToyTarget(TargetBase):  # the optional members (chip_ops, model_problems, ...) as defaults
    family = "toy"
    code = ("toyfam",)
    integer_activations = False
    files = (ProgramFile("toy program", (".toy",), (b"TOYPROG1",), "toyfam.files:inspect", "toyfam.files:bench"),)
    toolchain = None
    stages = (
        Stage("map", False, "toyfam.map_stage", (), _quantized,
              lambda p, m: {"facts.json": p.output.dir / "facts.json"}, _params),
        Stage("assemble", False, "toyfam.assemble_stage", (),
              lambda p, m: {"facts.json": p.output.dir / "facts.json"},
              lambda p, m: {"program": p.output.dir / program_name(p)}, _params),
        Stage("benchmark", False, "toyfam.benchmark_stage", (),
              lambda p, m: {"program": p.output.dir / program_name(p)},
              lambda p, m: {"benchmark.json": p.output.dir / "benchmark.json"}, _params),
    )

    def target_spec(self, t: dict[str, Any], checker: Any) -> ToySpec:
        if t["lanes"] & (t["lanes"] - 1):
            checker.error(("target", "lanes"), f"lanes must be a power of two, not {t['lanes']}")
        return ToySpec("toy", t["lanes"])

    def check_pipeline(self, spec, checker) -> None:
        pass

    def precision(self, spec) -> PrecisionRules:
        return PrecisionRules(weight_bits=(8,), activations="bfloat16")

    def quantize_params(self, spec) -> NoParams:
        return NoParams()

    def quantize_record(self, ai, params) -> dict[str, Any]:
        return {"toy_nodes": len(ai.graph.node)}

    def host_nodes(self, ai, params) -> frozenset[str]:
        return frozenset()

    def show_mapping(self, output_dir: Path) -> str | None:
        facts = json.loads((output_dir / "facts.json").read_text())
        return "".join(f"{name}: {len(ops)} operators on the lanes\\n" for name, ops in facts.items())

    def supported_ops(self):
        return []


TARGET = ToyTarget()
'''

MAP_STAGE = '''
import json

import onnx


def run(ctx):
    facts = {}
    for name in ctx.params.models:
        model = onnx.load(str(ctx.inputs[f"{name}/quantized.onnx"]))
        facts[name] = [node.op_type for node in model.graph.node]
    ctx.outputs["facts.json"].write_text(json.dumps(facts, indent=2, sort_keys=True))
'''

ASSEMBLE_STAGE = '''
import json


def run(ctx):
    facts = json.loads(ctx.inputs["facts.json"].read_text())
    body = {"lanes": ctx.params.lanes, "models": facts}
    ctx.outputs["program"].write_bytes(b"TOYPROG1" + json.dumps(body, sort_keys=True).encode())
'''

BENCHMARK_STAGE = '''
import json

from toyfam.files import figures


def run(ctx):
    report = figures(ctx.inputs["program"].read_bytes())
    ctx.outputs["benchmark.json"].write_text(json.dumps(report, indent=2))
'''

FILES = '''
import json

from accelbuild.errors import InputFileError


def _program(path, shown):
    data = path.read_bytes()
    if not data.startswith(b"TOYPROG1"):
        raise InputFileError(shown, "not a toy program (no TOYPROG1 magic)")
    return data


def figures(data):
    body = json.loads(data[8:])
    models = []
    for name, ops in sorted(body["models"].items()):
        cycles = -(-len(ops) // body["lanes"])  # one operator per lane per cycle
        latency_ms = cycles * 1e-6
        models.append({"name": name, "fps": round(1000 / latency_ms, 2), "latency_ms": latency_ms})
    return {"simulated": True, "fps": round(sum(m["fps"] for m in models), 2),
            "latency_ms": max(m["latency_ms"] for m in models), "models": models,
            "ops_total": sum(len(ops) for ops in body["models"].values())}


def inspect(path, shown):
    body = json.loads(_program(path, shown)[8:])
    return f"{shown}: toy program, {body['lanes']} lanes, models {', '.join(sorted(body['models']))}\\n"


def bench(path, shown, frames):
    report = figures(_program(path, shown))
    return report, f"{shown}: {report['fps']} FPS (simulated)\\n"
'''

FRAGMENT = {
    "family": "toy",
    "summary": "a made-up accelerator (tests/targets/test_plugin_family.py)",
    "checks": [{"name": "max_ops", "metric": "ops_total", "direction": "max", "unit": "operators",
                "description": "Most operators in the program.", "source": "ops_total",
                "schema": {"type": "integer", "minimum": 0}}],
    "target": {
        "description": "Keys of family toy.",
        "type": "object",
        "additionalProperties": False,
        "required": ["family"],
        "properties": {
            "family": {"const": "toy"},
            "lanes": {"description": "Lanes.", "type": "integer", "minimum": 1, "maximum": 64, "default": 4},
        },
    },
}

PIPELINE = """\
accelbuild: 1
name: t
target: {family: toy, lanes: LANES}
models:
  - path: models/tinycls.onnx
benchmark: {accuracy: {samples: 1}}
checks: CHECKS
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    package = root / "toyfam"
    package.mkdir()
    (package / "__init__.py").write_text('"""A throwaway accelbuild family."""\n')
    for name, text in (("target.py", TARGET_PY), ("map_stage.py", MAP_STAGE), ("assemble_stage.py", ASSEMBLE_STAGE),
                       ("benchmark_stage.py", BENCHMARK_STAGE), ("files.py", FILES)):
        (package / name).write_text(text)
    (package / "target.schema.json").write_text(json.dumps(FRAGMENT, indent=2))
    info = root / "toyfam-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyfam\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[accelbuild.families]\ntoy = toyfam.target\n")
    return root


def _project(tmp_path: Path, lanes: str = "4", checks: str = "{max_ops: 1000, min_fps: 1}") -> Path:
    (tmp_path / "models").mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE_MODELS / "tinycls.onnx", tmp_path / "models" / "tinycls.onnx")
    (tmp_path / "t.yaml").write_text(PIPELINE.replace("LANES", lanes).replace("CHECKS", checks))
    return tmp_path


def _python_path(site: Path) -> dict[str, str]:
    """The plug-in's folder first, then the caller's PYTHONPATH (the accelbuild under test)."""
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)}


def _cli(site: Path, project: Path, *args: str):
    """In a process of its own: the plug-in is an installed distribution that a fresh interpreter finds (the
    accelbuild under test stays first on the path when PYTHONPATH names it)."""
    return run_cli_process(*args, cwd=project, env=_python_path(site))


def test_a_plugin_family_builds_checks_and_is_inspected(site: Path, tmp_path: Path) -> None:
    project = _project(tmp_path / "a")
    result = _cli(site, project, "run", "t.yaml", "--state-dir", "s", "--show-mapping")
    assert result.code == 0, result.stderr
    assert "t: tinycls: " in result.stdout and "operators on the lanes" in result.stdout
    facts = json.loads((project / "build/t/facts.json").read_text())
    assert facts["tinycls"] and all(isinstance(op, str) for op in facts["tinycls"])
    bench = json.loads((project / "build/t/benchmark.json").read_text())
    assert bench["ops_total"] == len(facts["tinycls"]) and bench["fps"] > 0
    assert json.loads((project / "build/t/tinycls/quantize.json").read_text())["toy_nodes"] > 0

    shown = _cli(site, project, "inspect", "build/t/t.toy")
    assert shown.code == 0 and shown.stdout == "build/t/t.toy: toy program, 4 lanes, models tinycls\n"
    timed = _cli(site, project, "bench", "build/t/t.toy", "--json")
    assert timed.code == 0 and timed.json()["fps"] == bench["fps"]

    other = _project(tmp_path / "b", lanes="8")
    assert _cli(site, other, "run", "t.yaml", "--state-dir", "s").code == 0
    compared = _cli(site, project, "compare", "build/t", str(other / "build/t"), "--json")
    assert compared.code == 0, compared.stderr
    rows = {r["row"]: r for r in compared.json()["rows"]}
    assert rows["ops_total"]["values"] == [bench["ops_total"]] * 2 and rows["ops_total"]["higher_is_better"] is False
    assert rows["fps"]["best"] == str(other / "build/t")  # twice the lanes

    schema = json.loads(_cli(site, project, "schema").stdout)
    assert "toy" in schema["properties"]["target"]["properties"]["family"]["enum"]
    assert "max_ops" in schema["properties"]["checks"]["properties"]


def test_its_keys_and_checks_are_validated(site: Path, tmp_path: Path) -> None:
    project = _project(tmp_path, checks="{max_ops: 1}")
    failed = _cli(site, project, "run", "t.yaml", "--state-dir", "s")
    assert failed.code == 1 and "max_ops" in failed.stderr and "FAILED" in failed.stderr

    (project / "t.yaml").write_text(PIPELINE.replace("lanes: LANES", "lane: 4").replace("CHECKS", "{}"))
    result = _cli(site, project, "validate", "t.yaml")
    assert result.code == 2 and "t.yaml:3:" in result.stderr and "'lanes'" in result.stderr, result.stderr
    _project(project, lanes="3")
    result = _cli(site, project, "validate", "t.yaml")
    assert result.code == 2 and "t.yaml:3:" in result.stderr and "power of two" in result.stderr
    (project / "t.yaml").write_text(PIPELINE.replace("toy, lanes: LANES", "tyo").replace("CHECKS", "{}"))
    result = _cli(site, project, "validate", "t.yaml")
    assert result.code == 2 and "did you mean 'toy'?" in result.stderr and "Traceback" not in result.stderr
    _project(project, checks="{max_chips: 2}")
    result = _cli(site, project, "validate", "t.yaml")
    assert result.code == 2 and "check max_chips does not apply to family toy" in result.stderr


def test_loading_a_pipeline_imports_only_its_family(site: Path, tmp_path: Path) -> None:
    project = _project(tmp_path)
    code = ("import sys; from accelbuild.config.load import load_pipelines; load_pipelines(['t.yaml']); "
            "print(sorted(m for m in sys.modules if m.startswith(('accelbuild.targets.', 'toyfam'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=project, env=_python_path(site),
                         capture_output=True, text=True, check=True).stdout
    loaded = eval(out)  # a printed list of module names
    assert "toyfam.target" in loaded
    # the other families' packages are located (their fragments are read), none of their modules imported
    assert [m for m in loaded if m.count(".") > 2 and not m.startswith("toyfam")] == [], loaded
