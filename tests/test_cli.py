"""The command line contract: commands, exit codes, output streams."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from conftest import REPO, clean_env, run_cli, run_cli_process, write

GOOD = """\
accelbuild: 1
name: demo
models:
  - name: det
    path: models/tinydet.onnx
    input_shapes: {images: [64, 64, 3]}
  - name: mlp
    path: models/mlp.onnx
"""


def test_schema_prints_the_packaged_schema(tmp_path: Path) -> None:
    result = run_cli("schema", cwd=tmp_path)
    assert result.code == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == json.loads((REPO / "schemas" / "pipeline.schema.json").read_text())


def test_validate_ok_and_bad(project: Path) -> None:
    write(project / "good.yaml", GOOD)
    ok = run_cli("validate", "good.yaml", cwd=project)
    assert ok.code == 0 and "good.yaml: ok" in ok.stdout
    write(project / "bad.yaml", GOOD.replace("models:", "modles:"))
    bad = run_cli("validate", "good.yaml", "bad.yaml", cwd=project)
    assert bad.code == 2
    assert bad.stderr.splitlines()[0] == "bad.yaml:3:1: unknown key 'modles' in the top level; did you mean 'models'?"


def test_bad_usage_exits_2(tmp_path: Path) -> None:
    assert run_cli("run", cwd=tmp_path).code == 2
    assert run_cli("run", "x.yaml", "-j", "0", cwd=tmp_path).code == 2
    assert run_cli("run", "x.yaml", "--until", "link", cwd=tmp_path).code == 2
    missing = run_cli("run", "x.yaml", cwd=tmp_path)
    assert missing.code == 2 and missing.stderr.startswith("x.yaml: no such file")


def test_stage_user_error_is_positioned_and_exits_2(project: Path) -> None:
    write(project / "p.yaml", GOOD.replace("images:", "image:"))
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--json", cwd=project)
    assert result.code == 2
    assert "Traceback" not in result.stderr
    assert "p.yaml:6:20: model 'det' has no input named 'image'; did you mean 'images'?" in result.stderr
    assert result.json()["ok"] is False


def test_keep_going_builds_what_does_not_depend_on_the_failure(project: Path) -> None:
    write(project / "p.yaml", GOOD.replace("[64, 64, 3]", "[64, 64]"))
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--json", "--keep-going", "--until", "crop", cwd=project)
    assert result.code == 2
    assert result.statuses() == {"demo:det:import": "failed", "demo:mlp:import": "ran",
                                 "demo:det:crop": "skipped", "demo:mlp:crop": "ran"}
    assert "give (H, W, C) without the batch, not 2 value(s)" in result.stderr


def test_stderr_has_one_line_per_task(project: Path) -> None:
    write(project / "p.yaml", GOOD)
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "import", cwd=project)
    assert result.code == 0 and result.stdout == ""
    *lines, summary = result.stderr.splitlines()
    assert [line.split()[:2] for line in lines] == [["demo:det:import", "ran"], ["demo:mlp:import", "ran"]]
    assert all(float(line.split()[2].rstrip("s")) >= 0 for line in lines)
    assert summary.startswith("accelbuild: 2 tasks: 2 ran, 0 failed in ") and summary.endswith(" s")
    assert "one line per task on stderr (name, status, seconds)" in (REPO / "README.md").read_text()


def test_help_names_every_exit_code_and_every_family(tmp_path: Path) -> None:
    """--help's epilog, the README and docs/contract.md list the same exit codes, Ctrl-C's 130 among them; the
    tool is described for edge accelerators of every family, not only dataflow chips."""
    import tomllib

    from accelbuild import cli

    help_text = " ".join(run_cli("--help", cwd=tmp_path).stdout.split())
    assert cli.EXIT_CODES in help_text and "130 interrupted (Ctrl-C)" in cli.EXIT_CODES
    for doc in ("README.md", "docs/contract.md"):
        text = " ".join((REPO / doc).read_text().split())
        assert "130 interrupted (Ctrl-C)" in text, doc
    description = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["description"]
    schema = json.loads((REPO / "schemas" / "pipeline.schema.json").read_text())["description"]
    for text in (help_text, description, schema):
        assert "edge accelerator" in text and "dataflow edge" not in text and "a dataflow accelerator" not in text


def test_ctrl_c_exits_130(monkeypatch, capsys) -> None:
    from accelbuild import cli

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "schema", interrupted)
    assert cli.main(["schema"]) == 130
    assert capsys.readouterr().err == "accelbuild: interrupted\n"


def test_dry_run_and_status_run_nothing(project: Path) -> None:
    write(project / "p.yaml", GOOD)
    dry = run_cli("run", "p.yaml", "--state-dir", "s", "--dry-run", cwd=project)
    assert dry.code == 0 and "would run   demo:det:import" in dry.stdout
    assert "never built" in dry.stdout
    assert not (project / "build").exists()
    dry_json = run_cli("run", "p.yaml", "--state-dir", "s", "--dry-run", "--json", "--until", "crop",
                       cwd=project).json()
    assert [t["would_run"] for t in dry_json["tasks"]] == [True, True, True, True]


def test_until_limits_the_stages(project: Path) -> None:
    write(project / "p.yaml", GOOD)
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "import", "--json", cwd=project)
    assert result.code == 0
    assert {t["stage"] for t in result.json()["tasks"]} == {"import"}


def test_clean_removes_outputs_but_keeps_the_cache(project: Path) -> None:
    write(project / "p.yaml", GOOD)
    assert run_cli("run", "p.yaml", "--state-dir", "s", cwd=project).code == 0
    write(project / "build/demo/notes.txt", "mine")
    assert run_cli("clean", "p.yaml", "--state-dir", "s", cwd=project).code == 0
    assert not (project / "build/demo/det").exists()
    assert (project / "build/demo/notes.txt").read_text() == "mine"
    again = run_cli("run", "p.yaml", "--state-dir", "s", "--json", cwd=project)
    assert set(again.statuses().values()) == {"cached"}
    assert run_cli("clean", "p.yaml", "--state-dir", "s", "--cache", cwd=project).code == 0
    assert not (project / "s" / "cache").exists()


def test_environment_selects_state_and_cache_dirs(project: Path) -> None:
    write(project / "p.yaml", GOOD)
    env = {"ACCELBUILD_STATE_DIR": str(project / "st"), "ACCELBUILD_CACHE_DIR": str(project / "ca")}
    assert run_cli("run", "p.yaml", cwd=project, env=env).code == 0
    assert (project / "st" / "doit.sqlite3").is_file()
    assert (project / "ca" / "entries").is_dir()
    assert not (project / ".accelbuild").exists()


def test_default_state_dir_is_dot_accelbuild(project: Path) -> None:
    write(project / "p.yaml", GOOD)
    assert run_cli("run", "p.yaml", cwd=project).code == 0
    assert (project / ".accelbuild" / "doit.sqlite3").is_file()
    assert (project / ".accelbuild" / "cache" / "objects").is_dir()


def test_several_pipelines_in_one_run(project: Path) -> None:
    write(project / "a.yaml", GOOD.replace("name: demo", "name: a"))
    write(project / "b.yaml", GOOD.replace("name: demo", "name: b"))
    result = run_cli_process("run", "a.yaml", "b.yaml", "--state-dir", "s", "-j", "2", "--json", "--until", "crop",
                             cwd=project)  # -j: doit's worker processes
    assert result.code == 0
    assert len(result.json()["tasks"]) == 8
    clash = run_cli("run", "a.yaml", "a.yaml", "--state-dir", "s", cwd=project)
    assert clash.code == 2 and "names must be unique in one run" in clash.stderr


def test_shipped_pipeline_builds_then_is_up_to_date(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines", ignore=shutil.ignore_patterns("build"))
    shutil.copytree(REPO / "examples" / "models", tmp_path / "examples" / "models")
    first = run_cli("run", "pipelines/tinydet.yaml", "--json", cwd=tmp_path)
    assert first.code == 0, first.stderr
    assert set(first.statuses().values()) == {"ran"}
    second = run_cli("run", "pipelines/tinydet.yaml", "--json", cwd=tmp_path)
    assert second.code == 0 and set(second.statuses().values()) == {"up-to-date"}


def test_messages_name_each_thing_once_and_say_what_was_meant(project: Path) -> None:
    """A bad model file is named once; a model given to inspect is described, not refused; a platform in the
    wrong case gets the built-in name it meant; a pipeline named after its model is not said twice."""
    (project / "garbage.onnx").write_bytes(b"garbage")
    for command in ("init", "tensors"):
        said = run_cli(command, "garbage.onnx", cwd=project)
        assert said.code == 2 and said.stderr.startswith("garbage.onnx: not an ONNX model"), said.stderr
        assert said.stderr.count("garbage.onnx") == 1
    described = run_cli("inspect", "models/tinycls.onnx", cwd=project)
    assert described.code == 0 and "a model file, not a compiled program" in described.stdout
    assert "inputs:" in described.stdout and "outputs:" in described.stdout
    write(project / "t.yaml", "accelbuild: 1\nmodels:\n  - path: models/tinycls.onnx\n"
                              "target: {family: npu, platform: TDA4VM}\n")
    wrong_case = run_cli("validate", "t.yaml", cwd=project)
    assert wrong_case.code == 2 and wrong_case.stderr.splitlines()[0].endswith("did you mean 'tda4vm'?")
    write(project / "tinycls.yaml", "accelbuild: 1\nmodels:\n  - path: models/tinycls.onnx\n"
                                    "target: {family: npu, platform: x5}\nbenchmark: {accuracy: {samples: 1}}\n")
    built = run_cli("run", "tinycls.yaml", cwd=project)
    assert built.code == 0, built.stderr
    assert "tinycls: tinycls:" not in built.stderr and "accelbuild: partition:" not in built.stderr
    assert built.stderr.count("tinycls: 1 subgraph(s), 1 on the NPU") == 1  # once, naming the model


def test_main_runs_again_in_the_same_process_with_nothing_left_over(project: Path) -> None:
    """cli.main called three times in one process: each call sees its own environment and options, and the
    process's logging handlers, environment and working directory are as before."""
    write(project / "p.yaml", GOOD)
    handlers, environ, cwd = list(logging.getLogger().handlers), dict(os.environ), os.getcwd()
    first = run_cli("run", "p.yaml", "--until", "import", cwd=project, env={"ACCELBUILD_STATE_DIR": "elsewhere"})
    assert first.code == 0 and (project / "elsewhere").is_dir() and not (project / ".accelbuild").exists()
    second = run_cli("run", "p.yaml", "--until", "import", cwd=project)
    assert second.code == 0 and (project / ".accelbuild").is_dir()  # the first call's setting is gone
    assert "demo:det:import" in second.stderr and "ran" in second.stderr  # a new state dir: built again
    quiet = run_cli("run", "p.yaml", "--until", "import", "--force", "-q", cwd=project)
    assert quiet.code == 0 and "demo:det:import" not in quiet.stderr
    assert logging.getLogger().handlers == handlers and dict(os.environ) == environ and os.getcwd() == cwd


# The process contract: what only a real ``accelbuild`` process shows (the tests above call cli.main in-process).

def test_exit_codes_and_streams_of_the_process(project: Path) -> None:
    """``python -m accelbuild.cli``: 0 with the summary on stdout, 2 for a usage error and for a positioned
    user error found by a stage, each message on stderr and never a traceback."""
    write(project / "p.yaml", GOOD)
    ok = run_cli_process("run", "p.yaml", "--state-dir", "s", "--until", "import", "--json", cwd=project)
    assert ok.code == 0 and ok.json()["ok"] is True and "Traceback" not in ok.stderr
    usage = run_cli_process("run", "p.yaml", "--until", "link", cwd=project)
    assert usage.code == 2 and usage.stdout == "" and "invalid choice: 'link'" in usage.stderr
    write(project / "bad.yaml", GOOD.replace("images:", "image:"))
    bad = run_cli_process("run", "bad.yaml", "--state-dir", "s", cwd=project)
    assert bad.code == 2 and "Traceback" not in bad.stderr
    assert "bad.yaml:6:20: model 'det' has no input named 'image'; did you mean 'images'?" in bad.stderr


def test_console_script_is_the_cli(project: Path) -> None:
    """The ``accelbuild`` script pip installs next to the interpreter runs ``accelbuild.cli:console``."""
    script = Path(sys.executable).with_name("accelbuild")
    assert script.is_file(), f"{script}: not installed (pip install -e .)"
    write(project / "bad.yaml", GOOD.replace("models:", "modles:"))
    proc = subprocess.run([str(script), "validate", "bad.yaml"], cwd=project, env=clean_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[0] == "bad.yaml:3:1: unknown key 'modles' in the top level; did you mean 'models'?"
    in_process = run_cli("validate", "bad.yaml", cwd=project)
    assert (in_process.code, in_process.stdout, in_process.stderr) == (2, proc.stdout, proc.stderr)


def test_console_runs_the_exit_handlers_and_flushes_before_it_leaves(tmp_path: Path) -> None:
    """``cli.console`` ends the process without the interpreter's teardown: the exit handlers still ran, all of a
    long output reached the pipe, and the exit code is the command's."""
    marker = tmp_path / "handler-ran"
    script = ("import atexit, pathlib, sys\n"
              "from accelbuild import cli\n"
              f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'ran')\n"
              "sys.argv = ['accelbuild', *sys.argv[1:]]\n"
              "cli.console()\n")
    schema = subprocess.run([sys.executable, "-c", script, "schema"], cwd=tmp_path, env=clean_env(),
                            capture_output=True, text=True, timeout=120)
    assert schema.returncode == 0 and marker.read_text() == "ran"
    assert len(schema.stdout) > 10_000 and json.loads(schema.stdout)["type"] == "object"
    marker.unlink()
    usage = subprocess.run([sys.executable, "-c", script, "validate", "missing.yaml"], cwd=tmp_path,
                           env=clean_env(), capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "missing.yaml" in usage.stderr and marker.read_text() == "ran"
