"""``accelbuild tensors MODEL``: a model's inputs, outputs and candidate crop tensors, as a build imports it."""

from __future__ import annotations

import argparse
import json
import sys


def main(args: argparse.Namespace) -> int:
    from accelbuild import api
    from accelbuild.engine import model_info

    info = api.inspect_model(args.model, dict(args.input_shape))
    sys.stdout.write(json.dumps(info.as_json(), indent=2) + "\n" if args.json else model_info.describe(info))
    return 0
