from pathlib import Path

import pytest

from accelbuild.config.yaml_source import MAX_NODES, load_yaml, parse_yaml
from accelbuild.errors import ConfigError


def test_positions_of_values_and_keys() -> None:
    doc = parse_yaml("accelbuild: 1\nmodels:\n  - path: a.onnx\n    name: x\n", "p.yaml")
    assert doc.data == {"accelbuild": 1, "models": [{"path": "a.onnx", "name": "x"}]}
    assert str(doc.where(("models", 0, "name"))) == "p.yaml:4:11"
    assert str(doc.where(("models", 0, "name"), key=True)) == "p.yaml:4:5"
    assert str(doc.where(("models", 0, "missing"))) == "p.yaml:3:5"  # falls back to the enclosing node


def test_duplicate_key_is_an_error_at_the_second_key() -> None:
    with pytest.raises(ConfigError) as err:
        parse_yaml("a: 1\nb: 2\na: 3\n", "p.yaml")
    assert str(err.value) == "p.yaml:3:1: duplicate key 'a'"


def test_merge_keys_may_be_overridden() -> None:
    doc = parse_yaml("base: &b {x: 1, y: 2}\nthing:\n  <<: *b\n  y: 3\n", "p.yaml")
    assert doc.data["thing"] == {"x": 1, "y": 3}


def test_python_tags_are_refused_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    text = f"a: !!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises(ConfigError) as err:
        parse_yaml(text, "p.yaml")
    assert str(err.value).startswith("p.yaml:1:4: unsupported YAML tag '!!python/object/apply:os.system'")
    assert not marker.exists()


def test_alias_bomb_is_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    with pytest.raises(ConfigError) as err:
        parse_yaml("\n".join(lines) + "\n", "p.yaml")
    assert f"more than {MAX_NODES} values" in str(err.value)


def test_syntax_error_has_a_position() -> None:
    with pytest.raises(ConfigError) as err:
        parse_yaml("a: [1, 2\nb: 3\n", "p.yaml")
    assert str(err.value).startswith("p.yaml:2:")
    assert "YAML syntax error" in str(err.value)


def test_non_utf8_bytes_are_positioned(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(b"accelbuild: 1\nname: caf\xe9\n")
    with pytest.raises(ConfigError) as err:
        load_yaml(path, "p.yaml")
    assert str(err.value) == "p.yaml:2:10: file is not valid UTF-8 (byte 0xe9)"


def test_empty_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing here\n")
    assert load_yaml(tmp_path / "empty.yaml").data is None
    with pytest.raises(ConfigError) as err:
        load_yaml(tmp_path / "nope.yaml", "nope.yaml")
    assert str(err.value) == "nope.yaml: no such file"


def test_snippet_points_at_the_column() -> None:
    doc = parse_yaml("a:\n  bb: 1\n", "p.yaml")
    where = doc.where(("a", "bb"), key=True)
    assert doc.snippet(where).splitlines() == ["    2 |   bb: 1", "      |   ^"]


def test_dates_stay_as_written_and_nan_is_refused() -> None:
    assert parse_yaml("name: 2024-06-01\n", "p.yaml").data == {"name": "2024-06-01"}
    with pytest.raises(ConfigError) as err:
        parse_yaml("fps: .inf\n", "p.yaml")
    assert str(err.value) == "p.yaml:1:6: '.inf' is not a finite number"


def test_deep_nesting_is_refused_before_the_parser_recurses() -> None:
    with pytest.raises(ConfigError) as err:
        parse_yaml("a: " + "[" * 5000 + "]" * 5000 + "\n", "p.yaml")
    assert str(err.value) == "p.yaml:1:68: nesting deeper than 64 levels"
