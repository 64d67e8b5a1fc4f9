from pathlib import Path

from accelbuild.build.cache import ArtifactCache, cache_key


def _files(folder: Path, **contents: bytes) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data in contents.items():
        (folder / name).write_bytes(data)
        paths[name] = folder / name
    return paths


def test_key_depends_on_stage_params_inputs_and_version_only() -> None:
    base = cache_key("import", "p1", {"model": "abc"}, "0.1.0")
    assert base == cache_key("import", "p1", {"model": "abc"}, "0.1.0")
    assert base != cache_key("crop", "p1", {"model": "abc"}, "0.1.0")
    assert base != cache_key("import", "p2", {"model": "abc"}, "0.1.0")
    assert base != cache_key("import", "p1", {"model": "abd"}, "0.1.0")
    assert base != cache_key("import", "p1", {"model": "abc"}, "0.2.0")


def test_store_and_restore(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    produced = _files(tmp_path / "work", a=b"alpha", b=b"beta")
    cache.store("k" * 64, produced)
    targets = {"a": tmp_path / "out/a", "b": tmp_path / "out/b"}
    assert cache.restore("k" * 64, targets)
    assert targets["a"].read_bytes() == b"alpha" and targets["b"].read_bytes() == b"beta"
    assert not cache.restore("x" * 64, targets)


def test_restore_removes_optional_outputs_the_entry_lacks(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    cache.store("k" * 64, _files(tmp_path / "work", a=b"alpha"))
    stale = tmp_path / "out/pre.onnx"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    assert cache.restore("k" * 64, {"a": tmp_path / "out/a", "pre.onnx": stale})
    assert not stale.exists()


def test_altered_or_missing_object_is_a_miss_and_the_entry_is_dropped(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    cache.store("k" * 64, _files(tmp_path / "work", a=b"alpha"))
    (obj,) = [p for p in (tmp_path / "cache/objects").rglob("*") if p.is_file()]
    obj.write_bytes(b"alpHa")  # same size, different bytes
    assert cache.lookup("k" * 64) is None
    assert not list((tmp_path / "cache/entries").rglob("*.json"))
    cache.store("k" * 64, _files(tmp_path / "work", a=b"alpha"))  # a rebuild repairs the object
    assert cache.lookup("k" * 64) is not None


def test_truncated_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    cache.store("k" * 64, _files(tmp_path / "work", a=b"alpha"))
    (entry,) = (tmp_path / "cache/entries").rglob("*.json")
    entry.write_text(entry.read_text()[:10])
    assert cache.lookup("k" * 64) is None


def test_identical_contents_are_stored_once(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    cache.store("a" * 64, _files(tmp_path / "w1", x=b"same"))
    cache.store("b" * 64, _files(tmp_path / "w2", y=b"same"))
    assert len([p for p in (tmp_path / "cache/objects").rglob("*") if p.is_file()]) == 1
