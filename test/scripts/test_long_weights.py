"""scripts/long_weights.py keeps weights in history, not in the tree: after `stash` the tree at
HEAD has no stashed file, `restore` gives back the same bytes from the first commit, and a
directory that is not a trainer output or a dirty index is refused. Real git, a scratch repo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import long_weights as lw  # noqa: E402


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    for key, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@t"),
                       ("GIT_COMMITTER_NAME", "t"), ("GIT_COMMITTER_EMAIL", "t@t")):  # fmt: skip
        monkeypatch.setenv(key, value)
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "README").write_text("x\n")
    subprocess.run(["git", "add", "README"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "init"], cwd=root, check=True)
    return root


def _weights(path: Path) -> dict[str, bytes]:
    path.mkdir()
    files = {name: os.urandom(64) for name in lw.FILES}
    for name, data in files.items():
        (path / name).write_bytes(data)
    return files


def test_stash_keeps_weights_in_history_only(repo: Path, tmp_path: Path):
    files = _weights(tmp_path / "w")
    sha = lw.stash(tmp_path / "w", "trial", root=repo)
    assert not (repo / lw.STASH).exists()
    assert lw.STASH not in lw.git("ls-tree", "-r", "--name-only", "HEAD", root=repo)
    assert lw.git("rev-parse", "HEAD~1", root=repo) == sha
    out = tmp_path / "back"
    lw.restore(sha, out, root=repo)
    for name, data in files.items():
        assert (out / name).read_bytes() == data
    assert (out / "tokenizer.json").read_bytes() == (lw.TOKENIZER / "tokenizer.json").read_bytes()


def test_refuses_a_partial_directory_and_a_staged_index(repo: Path, tmp_path: Path):
    _weights(tmp_path / "w")
    (tmp_path / "w" / "long-training.json").unlink()
    with pytest.raises(SystemExit, match="long-training.json"):
        lw.stash(tmp_path / "w", "partial", root=repo)
    (tmp_path / "w" / "long-training.json").write_text("{}")
    (repo / "README").write_text("y\n")
    subprocess.run(["git", "add", "README"], cwd=repo, check=True)
    with pytest.raises(SystemExit, match="staged"):
        lw.stash(tmp_path / "w", "dirty", root=repo)
    assert lw.git("log", "--format=%s", "-1", root=repo) == "init"
