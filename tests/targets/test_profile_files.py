"""Hardware profile files: the built-in ones are not validated at load, so they are validated here."""

from __future__ import annotations

import pytest

from accelbuild.config import schema_check
from accelbuild.config.yaml_source import load_yaml
from accelbuild.targets.mx3.hardware import MX3_PROFILES
from accelbuild.targets.npu.hardware import NPU_PROFILES

SHIPPED = [(kind, name, path) for kind in (MX3_PROFILES, NPU_PROFILES) for name, path in sorted(kind.builtins().items())]


@pytest.mark.parametrize(("kind", "name", "path"), SHIPPED, ids=[f"{k.package.split('.')[-2]}-{n}" for k, n, _ in SHIPPED])
def test_every_shipped_profile_meets_its_schema(kind, name, path) -> None:
    assert schema_check.validate(load_yaml(path), kind.schema) == []
