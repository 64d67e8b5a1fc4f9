"""``accelbuild validate``: configs, and the files they reference (models opened through import and crop)."""

from __future__ import annotations

import argparse

from accelbuild.commands import common


def main(args: argparse.Namespace) -> int:
    from accelbuild.engine.preflight import check_models

    pipelines = common.load(args.pipelines)
    check_models(pipelines)
    for pipeline in pipelines:
        models = ", ".join(m.name for m in pipeline.models)
        print(f"{pipeline.source.file}: ok (pipeline {pipeline.name}; models: {models})")
    return 0
