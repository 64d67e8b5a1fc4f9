import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

from accelbuild.engine.state import LOCK_NAME

from conftest import write

PIPELINE = "accelbuild: 1\nname: p\nmodels: [{path: models/mlp.onnx}]\n"


def test_second_run_waits_for_the_lock_and_says_so(project: Path) -> None:
    """The second run says it waits, then waits: the test holds the lock until that message arrives (no fixed
    sleep, so a loaded machine only makes it slower), checks nothing was built meanwhile, then lets it go."""
    write(project / "p.yaml", PIPELINE)
    (project / "s").mkdir()
    fd = os.open(project / "s" / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbuild.cli", "run", "p.yaml", "--state-dir", "s"],
        cwd=project, stderr=subprocess.PIPE, text=True,
    )
    lines: list[str] = []
    waiting = threading.Event()

    def read() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if "another accelbuild run is using" in line:
                waiting.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert waiting.wait(timeout=120), "".join(lines)
        assert proc.poll() is None, "the run should wait while another holds the lock"
        assert not (project / "build").exists()
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert proc.wait(timeout=120) == 0, "".join(lines)
    reader.join(timeout=10)
    assert (project / "build/p/mlp/imported.onnx").is_file()


def test_concurrent_runs_on_one_state_dir_both_succeed(project: Path) -> None:
    write(project / "p.yaml", PIPELINE)
    procs = [
        subprocess.Popen([sys.executable, "-m", "accelbuild.cli", "run", "p.yaml", "--state-dir", "s"],
                         cwd=project, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for proc in procs:
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
