import subprocess
import sys


def _run(*args):
    return subprocess.run([sys.executable, "-m", "analysis_lib", *args], capture_output=True,
                          text=True, timeout=300)


def test_lists_and_unknown_profile():
    assert "tweets" in _run("corpora").stdout
    assert "random:xlnet" in _run("models").stdout
    bad = _run("book", "--profile", "nope")
    assert bad.returncode == 1 and "unknown profile 'nope'" in bad.stderr
