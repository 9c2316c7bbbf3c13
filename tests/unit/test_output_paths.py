"""Where dpaudit writes a file: nothing there or a regular file, never a directory, a FIFO, a
device, a socket or a dangling link — with ``--overwrite`` or not (``storage.files``)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from auditlib.exceptions import StoreError
from storage import files


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("sock")
    os.symlink("/dev/null", "devlink")
    os.symlink("nowhere", "dangling")
    Path("dir").mkdir()
    Path("file").write_text("mine\n")
    os.symlink("file", "filelink")
    return tmp_path


def test_kinds(places: Path) -> None:
    assert {name: files.kind(name) for name in sorted(os.listdir(places))} == {
        "dangling": "dangling symbolic link",
        "devlink": "character device",
        "dir": "directory",
        "fifo": "FIFO (named pipe)",
        "file": "file",
        "filelink": "file",
        "sock": "socket",
    }
    assert files.kind("/dev/null") == "character device"
    assert files.kind("absent") == files.kind("file/below") == "none"


@pytest.mark.parametrize("name", ["fifo", "sock", "devlink", "dangling", "/dev/null"])
def test_special_files_are_refused_even_with_overwrite(places: Path, name: str) -> None:
    for overwrite in (False, True):
        with pytest.raises(StoreError, match=r"not a regular file; .*even with --overwrite"):
            files.check_file_target(name, overwrite, "report")
    assert files.kind(name) != "file"  # untouched


def test_a_file_only_with_overwrite(places: Path) -> None:
    files.check_file_target("absent.html", False, "report")
    files.check_file_target("file", True, "report")
    files.check_file_target("filelink", True, "report")
    with pytest.raises(StoreError, match="already exists; pass --overwrite"):
        files.check_file_target("file", False, "report")
    with pytest.raises(StoreError, match="is a directory; give a file name"):
        files.check_file_target("dir", True, "report")
