"""The ONNX backend node suite through the import stage: run it, sum it up, check it against expectations.

Each case of the node suite (generated from the node-case generators of the installed onnx package; the
wheel ships no ``backend/test/data/node`` folder) is a small model with inputs and expected outputs.
For every case:

1. the original model runs in onnxruntime and is compared with the expected outputs (onnx's own
   ``Runner.assert_similar_outputs``, the case's tolerances): a case onnxruntime itself does not
   reproduce is ``ort-cannot-run`` and says nothing about accelbuild;
2. the import stage runs on it in-process, in a folder of its own, exactly as ``accelbuild run`` does:
   ``accelbuild.stages.import_.run`` on a one-model pipeline with ``input_shapes: auto``;
3. ``imported.onnx`` runs in onnxruntime on the same inputs and is compared with the expected outputs.

Outcomes: ``reproduced``; ``refused`` (a user error, exit 2, with its message); ``ort-cannot-run``;
``wrong`` (the imported model disagrees where the original agrees); ``crash`` (any other exception, an
internal error, whatever onnxruntime does with the original). Used by ``tests/frontends/test_node_suite.py`` and
``bench/node_suite.py``; the expected outcomes live in ``tests/fixtures/node_suite_expected.yaml``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml

EXPECTED_FILE = Path(__file__).resolve().parent / "fixtures" / "node_suite_expected.yaml"
STATUSES = ("reproduced", "refused", "ort-cannot-run", "wrong", "crash")
PIPELINE = "accelbuild: 1\nname: case\nmodels:\n  - name: m\n    path: model.onnx\n"


@dataclass
class Outcome:
    case: str
    status: str
    message: str = ""  # the refusal, what differs, or the crash
    ort_runs: bool = True  # onnxruntime reproduces the expected outputs with the original model
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # what the import logged at WARNING and above

    @property
    def first_line(self) -> str:
        return self.message.splitlines()[0] if self.message else ""


# -- running -------------------------------------------------------------------------------------------

def collect_cases(op_type: str | None = None) -> list[Any]:
    """The node suite's cases (``onnx.backend.test.case.test_case.TestCase``), the same on every run."""
    from onnx.backend.test.case import node

    state = np.random.get_state()
    np.random.seed(0)  # the generators draw their inputs from numpy's global generator
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            cases = node.collect_testcases(op_type)
    finally:
        np.random.set_state(state)
    return sorted(cases, key=lambda c: c.name)


def run_suite(names: Sequence[str] | None = None) -> list[Outcome]:
    """Run the named cases (default: all) in this process; outcomes sorted by case name."""
    wanted = set(names) if names is not None else None
    shm = Path("/dev/shm")  # the stage fsyncs what it writes: keep that off a real disk where we can
    where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="node-suite-", dir=where) as tmp, _quiet_accelbuild_log():
        project = Project(Path(tmp))
        return [run_case(case, project) for case in collect_cases() if wanted is None or case.name in wanted]


class Project:
    """A folder with a one-model pipeline (``input_shapes: auto``) whose model file each case replaces.

    The pipeline is loaded once; every case then gets the import stage's own ``run``, with its outputs
    removed first.
    """

    def __init__(self, folder: Path) -> None:
        from accelbuild.config.load import load_pipeline

        self.folder = folder
        (folder / "model.onnx").write_bytes(b"")
        (folder / "p.yaml").write_text(PIPELINE)
        from accelbuild.engine.plan import plan

        self.job = plan([load_pipeline(str(folder / "p.yaml"))], until="import")[0]  # the planned import task
        self.outputs = {"imported.onnx": folder / "imported.onnx", "import.json": folder / "import.json"}

    def import_model(self, model: onnx.ModelProto) -> tuple[onnx.ModelProto | None, str | None, str | None]:
        """(imported model, refusal, crash): the import stage's ``run`` on ``model``."""
        from accelbuild.errors import (
            ConfigError,
            ConfigErrors,
            InputFileError,
            UserError,
        )
        from accelbuild.stages import import_
        from accelbuild.stages.context import StageContext

        for path in self.outputs.values():
            path.unlink(missing_ok=True)
        onnx.save(model, self.folder / "model.onnx")
        job = self.job
        try:
            import_.run(StageContext(job.params, job.inputs, dict(self.outputs), job.locate))
        except UserError as exc:
            errors = exc.errors if isinstance(exc, ConfigErrors) else [exc]
            texts = [e.message if isinstance(e, (ConfigError, InputFileError)) else str(e) for e in errors]
            return None, "\n".join(texts).replace(str(self.folder) + os.sep, ""), None
        except Exception as exc:  # noqa: BLE001  an internal error: what this suite exists to find
            return None, None, f"{exc.__class__.__name__}: {exc}"
        return onnx.load(self.outputs["imported.onnx"]), None, None


def run_case(case: Any, project: Project) -> Outcome:
    """Run one case in ``project``; never raises."""
    started = time.perf_counter()
    inputs, expected = (_values(v) for v in case.data_sets[0])
    capture = _LogCapture()
    logger = logging.getLogger("accelbuild")
    logger.addHandler(capture)
    try:
        outcome = _outcome(case, project, inputs, expected)
    finally:
        logger.removeHandler(capture)
    outcome.seconds = round(time.perf_counter() - started, 3)
    outcome.warnings = capture.messages
    return outcome


def _outcome(case: Any, project: Project, inputs: list[Any], expected: list[Any]) -> Outcome:
    constants = {t.name for t in case.model.graph.initializer}
    feeds = dict(zip([v.name for v in case.model.graph.input if v.name not in constants], inputs))
    ort_problem = _mismatch(case, case.model, feeds, expected)
    imported, refusal, crash = project.import_model(case.model)
    if crash is not None:
        return Outcome(case.name, "crash", crash, ort_runs=ort_problem is None)
    if ort_problem is not None:
        return Outcome(case.name, "ort-cannot-run", ort_problem, ort_runs=False)
    if refusal is not None:
        return Outcome(case.name, "refused", refusal)
    assert imported is not None
    problem = _mismatch(case, imported, feeds, expected)
    if problem is not None:
        return Outcome(case.name, "wrong", problem)
    return Outcome(case.name, "reproduced")


def _mismatch(case: Any, model: onnx.ModelProto, feeds: dict[str, Any], expected: list[Any]) -> str | None:
    """None if ``model`` run in onnxruntime on ``feeds`` gives ``expected``, else what went wrong."""
    import onnxruntime as ort
    from onnx.backend.test.runner import Runner

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}  # the import may drop unused inputs
        got = session.run(None, {k: v for k, v in feeds.items() if k in names})
    except Exception as exc:  # noqa: BLE001  onnxruntime's own exception types
        return f"onnxruntime: {_first_line(str(exc))}"
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            Runner.assert_similar_outputs(expected, got, rtol=case.rtol, atol=case.atol)
    except (AssertionError, TypeError, ValueError) as exc:
        return f"outputs differ: {_first_line(str(exc))}"
    return None


def _values(values: Sequence[Any]) -> list[Any]:
    """A case's inputs or outputs as onnxruntime takes and gives them (the suite keeps some as protos)."""
    return [_value(v) for v in values]


def _value(value: Any) -> Any:
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, onnx.SequenceProto):
        return numpy_helper.to_list(value)
    if isinstance(value, onnx.OptionalProto):
        return _value(numpy_helper.to_optional(value))
    if isinstance(value, (list, tuple)):
        return [_value(v) for v in value]
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[0] if lines else text)[:300]


class _LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _quiet_accelbuild_log() -> Iterator[None]:
    """Keep the import's warnings (each outcome carries its own) off the console while the suite runs."""
    logger = logging.getLogger("accelbuild")
    before = logger.propagate
    logger.propagate = False
    try:
        yield
    finally:
        logger.propagate = before


# -- summing up ----------------------------------------------------------------------------------------

def summary(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Cases, onnxruntime-runnable, reproduced (and % of runnable), refused, crashes, wrong."""
    counts = {s: sum(o.status == s for o in outcomes) for s in STATUSES}
    runnable = sum(o.ort_runs for o in outcomes)
    return {
        "cases": len(outcomes),
        "ort_runnable": runnable,
        "reproduced": counts["reproduced"],
        "reproduced_pct": round(100.0 * counts["reproduced"] / runnable, 1) if runnable else 0.0,
        "refused": counts["refused"],
        "crashes": counts["crash"],
        "wrong": counts["wrong"],
        "ort_cannot_run": counts["ort-cannot-run"],
    }


# -- the expectation file ------------------------------------------------------------------------------

GENERATED = "# ---- generated by `python bench/node_suite.py --write-expected`: do not edit below ----"


@dataclass
class Expected:
    """``tests/fixtures/node_suite_expected.yaml``: the refusal families (hand-written: ``why``, ``message``, a
    regex on the refusal's first line) and the minimum rate above the ``GENERATED`` line, the versions and
    case lists below it."""

    minimum_reproduced_pct: float
    families: dict[str, dict[str, str]]
    versions: dict[str, str]
    refused: dict[str, list[str]]
    ort_cannot_run: list[str]
    reproduced: list[str]

    def outcome_of(self, case: str) -> str | None:
        """"reproduced", "refused: <family>", "ort-cannot-run", or None for a case not in the file."""
        return self._index.get(case)

    @cached_property
    def _index(self) -> dict[str, str]:
        index = {c: "reproduced" for c in self.reproduced}
        index.update({c: "ort-cannot-run" for c in self.ort_cannot_run})
        for name, cases in self.refused.items():
            index.update({c: f"refused: {name}" for c in cases})
        return index

    def family_of(self, message: str) -> str | None:
        """The refusal family whose message pattern matches the refusal's first line."""
        first = message.splitlines()[0] if message else ""
        return next((name for name, f in self.families.items() if re.search(f["message"], first)), None)


def load_expected(path: Path = EXPECTED_FILE) -> Expected:
    data = yaml.safe_load(path.read_text())
    return Expected(
        minimum_reproduced_pct=float(data["minimum_reproduced_pct"]),
        families=data["refusals"],
        versions={k: str(v) for k, v in (data.get("versions") or {}).items()},
        refused={k: list(v or []) for k, v in (data.get("refused") or {}).items()},
        ort_cannot_run=list(data.get("ort_cannot_run") or []),
        reproduced=list(data.get("reproduced") or []),
    )


def installed_versions() -> dict[str, str]:
    import onnxruntime

    return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def actual_outcome(outcome: Outcome, expected: Expected) -> str:
    """The outcome in the expectation file's terms ("refused: <family>", "refused: ?" if none fits)."""
    if outcome.status == "refused":
        return f"refused: {expected.family_of(outcome.message) or '?'}"
    return outcome.status


def differences(outcomes: Sequence[Outcome], expected: Expected, strict: bool) -> list[str]:
    """Cases whose outcome is not the expected one, one line each.

    ``strict`` (the installed onnx and onnxruntime are the ones the file was made with): every case must
    have its recorded outcome. Otherwise only regressions count: a case recorded as reproduced that
    onnxruntime still runs must still be reproduced, and a refusal must still fit a family.
    """
    problems = []
    for outcome in outcomes:
        want = expected.outcome_of(outcome.case)
        got = actual_outcome(outcome, expected)
        regression = want == "reproduced" and outcome.ort_runs or got == "refused: ?"
        if want != got and (strict or regression):
            problems.append(f"{outcome.case}: expected {want or 'no entry'}, got {got} {outcome.first_line!r}")
    return problems


def write_expected(outcomes: Sequence[Outcome], path: Path = EXPECTED_FILE) -> list[str]:
    """Rewrite the generated part of the expectation file from ``outcomes``; returns what stops it
    (crashes, wrong results, refusals no family fits), in which case the file is not written."""
    expected = load_expected(path)
    blocking = [f"{o.case}: {o.status}: {o.first_line}" for o in outcomes if o.status in ("crash", "wrong")
                or o.status == "refused" and expected.family_of(o.message) is None]
    if blocking:
        return blocking
    refused: dict[str, list[str]] = {name: [] for name in expected.families}
    for outcome in outcomes:
        if outcome.status == "refused":
            refused[expected.family_of(outcome.message) or ""].append(outcome.case)
    generated = {
        "versions": installed_versions(),
        "refused": refused,
        "ort_cannot_run": [o.case for o in outcomes if o.status == "ort-cannot-run"],
        "reproduced": [o.case for o in outcomes if o.status == "reproduced"],
    }
    hand_written = path.read_text().split(GENERATED, 1)[0].rstrip("\n")
    path.write_text(f"{hand_written}\n\n{GENERATED}\n{yaml.safe_dump(generated, sort_keys=False)}")
    return []
