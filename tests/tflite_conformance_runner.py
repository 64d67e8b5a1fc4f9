"""TFLite conformance: every builtin operator LiteRT runs, one small model each, through the TFLite frontend.

The operators are those of ``tflite.BuiltinOperator`` that LiteRT's builtin op resolver resolves: an
interpreter is built (without delegates) on a one-operator model of each, at versions 1 to 8, and an operator
it has no kernel for at any of them fails there ("Didn't find op for builtin opcode"). For each operator, each of its cases
(``accelbuild.testing.tflite_op_cases``; the :func:`probe` model where it has none):

1. the frontend converts it in-process (``load_tflite``): a user error (exit 2) is ``refused``;
2. LiteRT runs the ``.tflite`` on seeded random inputs; a model it cannot run is ``litert-cannot-run`` (a
   case to mend: it says nothing about the frontend);
3. onnxruntime runs the ONNX model on the same inputs; outputs must match LiteRT's (float: rtol 1e-4 and
   the case's atol; integers and bools exactly).

An operator is ``reproduced`` when every case is, ``refused`` when one is refused (its message is
recorded), ``wrong`` when one differs, ``crash`` on any other exception. The expected outcomes are
``accelbuild/frontends/tflite/conformance.json`` (docs/supported_ops.md shows them);
``python tests/tflite_conformance_runner.py`` prints the figures and ``--write`` rewrites the file.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tflite
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from accelbuild.errors import UserError
from accelbuild.frontends import tflite as tflite_frontend
from accelbuild.frontends.tflite import load_tflite
from accelbuild.testing.tflite_op_cases import CASES, Case, probe

EXPECTED_FILE = Path(tflite_frontend.__file__).resolve().parent / "conformance.json"  # docs/supported_ops.md
STATUSES = ("reproduced", "refused", "litert-cannot-run", "wrong", "crash")
_NOT_OPERATORS = ("CUSTOM", "DELEGATE", "PLACEHOLDER_FOR_GREATER_OP_CODES")


@dataclass(frozen=True)
class Outcome:
    operator: str
    status: str
    message: str = ""

    @property
    def reason(self) -> str:
        """The message on one line; for a refusal, the reason after ``OP (tensor 'T'): ``."""
        lines = [line.strip() for line in self.message.splitlines()]
        if self.status == "refused" and len(lines) > 1 and "): " in lines[1]:
            lines = [lines[1].split("): ", 1)[1], *lines[2:]]
        return " ".join(lines)


def _interpreter(data: bytes) -> Interpreter:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Interpreter(model_content=data, num_threads=1,
                           experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)


def litert_operators() -> dict[str, int]:
    """The builtin operators LiteRT's builtin resolver has a kernel for, with the lowest version it resolves
    (BROADCAST_TO starts at 2)."""
    found = {}
    for name in sorted(n for n in dir(tflite.BuiltinOperator) if n.isupper() and n not in _NOT_OPERATORS):
        for version in range(1, 9):
            try:
                _interpreter(probe(name, version).data)
            except (RuntimeError, ValueError) as exc:
                if "find op" in str(exc):
                    continue
            found[name] = version
            break
    return found


def _inputs(case: Case, interpreter: Interpreter) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    values = []
    for detail in interpreter.get_input_details():
        shape, dtype = detail["shape"], detail["dtype"]
        if dtype == np.float32:
            value = rng.uniform(case.low, case.high, shape)
            values.append((np.round(value) if case.integers else value).astype(np.float32))
        elif dtype == np.bool_:
            values.append(rng.integers(0, 2, shape).astype(np.bool_))
        else:
            values.append(rng.integers(int(case.low), int(case.high) + 1, shape).astype(dtype))
    return values


def _litert(case: Case, values: list[np.ndarray] | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    interpreter = _interpreter(case.data)
    interpreter.allocate_tensors()
    values = _inputs(case, interpreter) if values is None else values
    for detail, value in zip(interpreter.get_input_details(), values):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return values, [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def _mismatch(case: Case, got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} outputs, LiteRT {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"output {k} has shape {list(g.shape)}, LiteRT {list(w.shape)}"
        if w.dtype.kind == "f":
            if not np.allclose(g, w, rtol=1e-4, atol=case.atol, equal_nan=True):
                return f"output {k} differs by up to {float(np.nanmax(np.abs(g - w))):.3g}"
        elif not np.array_equal(g, w):
            return f"output {k} differs in {int(np.sum(g != w))} of {w.size} elements"
    return None


def run_case(operator: str, case: Case, folder: Path) -> Outcome:
    path = folder / f"{operator}.tflite"
    path.write_bytes(case.data)
    try:
        model = load_tflite(path)
    except UserError as exc:
        return Outcome(operator, "refused", str(exc).replace(str(path), f"{operator}.tflite"))
    try:
        values, want = _litert(case)
    except (RuntimeError, ValueError) as exc:
        return Outcome(operator, "litert-cannot-run", " ".join(str(exc).split())[:300])
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        got = session.run(None, {i.name: v for i, v in zip(model.graph.input, values)})
    except Exception as exc:  # noqa: BLE001  (any failure of the converted model is the frontend's crash)
        return Outcome(operator, "crash", f"{type(exc).__name__}: {exc}")
    problem = _mismatch(case, got, want)
    return Outcome(operator, "wrong", problem) if problem else Outcome(operator, "reproduced")


def run_operator(operator: str, folder: Path, version: int = 1) -> Outcome:
    """The operator's outcome: the first case that is not reproduced, or reproduced."""
    builders = CASES.get(operator) or [lambda: probe(operator, version)]
    for build in builders:
        try:
            outcome = run_case(operator, build(), folder)
        except Exception as exc:  # noqa: BLE001  (a crash is an outcome, recorded with its message)
            outcome = Outcome(operator, "crash", f"{type(exc).__name__}: {exc}")
        if outcome.status != "reproduced":
            return outcome
    return Outcome(operator, "reproduced")


def run_suite(operators: Sequence[str] | None = None) -> list[Outcome]:
    """Every operator's outcome (the variable-state warnings of the recurrent cases kept quiet)."""
    logger = logging.getLogger("accelbuild")
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with tempfile.TemporaryDirectory() as folder:
            versions = litert_operators() if operators is None else dict.fromkeys(operators, 1)
            return [run_operator(name, Path(folder), version) for name, version in versions.items()]
    finally:
        logger.setLevel(before)


def summary(outcomes: Sequence[Outcome]) -> dict[str, float | int]:
    counts = {s: sum(o.status == s for o in outcomes) for s in STATUSES}
    return {"operators": len(outcomes), **counts,
            "reproduced_pct": round(100.0 * counts["reproduced"] / len(outcomes), 1) if outcomes else 0.0}


def record(outcomes: Sequence[Outcome]) -> dict:
    """The expectation file's content: the figures and each operator's status and first message line."""
    return {"summary": summary(outcomes),
            "operators": {o.operator: {"status": o.status, "message": o.reason} for o in outcomes}}


def load_expected(path: Path = EXPECTED_FILE) -> dict:
    return json.loads(path.read_text())


if __name__ == "__main__":
    results = run_suite()
    if "--write" in sys.argv:
        EXPECTED_FILE.write_text(json.dumps(record(results), indent=1, sort_keys=True) + "\n")
    print(json.dumps(summary(results)))
    for o in results:
        if o.status != "reproduced":
            print(f"{o.operator}: {o.status}: {o.reason}")
