"""accelbuild as a library (docs/api.md): build the shipped tinydet pipeline, read its figures, ask what would
run again, and look inside a model file. Run from the repository's root:

    python examples/library/build_and_read.py
"""

from __future__ import annotations

from pathlib import Path

from accelbuild import api

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    pipelines = api.load(REPO / "pipelines" / "tinydet.yaml")
    summary = api.build(pipelines)
    for task in summary.results:
        print(f"{task.name:32} {task.status:10} {task.seconds:6.2f}s")
    figures = api.metrics(pipelines[0])
    assert figures is not None
    print(f"{pipelines[0].name}: {figures['fps']:,.1f} FPS ({figures['kind']}), worst cosine {figures['min_cosine']}")
    again = [e.name for e in api.status(pipelines) if e.would_run and not e.cached]
    print("would run again:", again or "nothing")
    info = api.inspect_model(REPO / "examples" / "models" / "tinycls.onnx")
    print("tinycls inputs:", [(i["name"], i["shape"]) for i in info.inputs])


if __name__ == "__main__":
    main()
