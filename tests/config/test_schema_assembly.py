"""The pipeline schema is assembled from the core part and each family's fragment."""

from __future__ import annotations

from accelbuild import families
from accelbuild.config import schema_assembly

from conftest import REPO


def test_the_committed_schema_is_current() -> None:
    committed = (REPO / "accelbuild" / "schemas" / "pipeline.schema.json").read_text(encoding="utf-8")
    assert committed == schema_assembly.committed_text(), \
        "regenerate: python -m accelbuild.config.schema_assembly > accelbuild/schemas/pipeline.schema.json"


def test_each_family_brings_its_branch_enum_value_and_checks() -> None:
    schema = schema_assembly.assemble(families.builtin().values())
    family = schema["properties"]["target"]["properties"]["family"]
    assert family["enum"] == ["mx3", "cpu", "ethos-u", "npu", "qnn", "rknn"] and family["default"] == "mx3"
    assert {"target_mx3", "target_npu", "target_ethos_u", "target_cpu", "target_qnn", "target_rknn"} <= set(schema["$defs"])
    assert list(schema["properties"]["checks"]["properties"]) == [
        "min_fps", "max_latency_ms", "min_cosine", "max_chips", "max_host_layers"]
    only_npu = schema_assembly.assemble([families.family("npu")])
    assert only_npu["properties"]["target"]["properties"]["family"]["enum"] == ["npu"]
    assert "max_chips" not in only_npu["properties"]["checks"]["properties"]
    # without the default family every branch needs target.family
    assert only_npu["properties"]["target"]["allOf"][0]["if"]["required"] == ["family"]
