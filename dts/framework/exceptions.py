# SPDX-License-Identifier: BSD-3-Clause
"""Errors the harness raises, one class per failure kind so a report says what broke."""


class DtsError(Exception):
    """Base class of every harness error."""


class CommandError(DtsError):
    """A host command (``ip``, ``sysctl``) failed; the message holds argv, exit code and stderr."""

    def __init__(self, argv: list[str], returncode: int | None, stdout: str, stderr: str):
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        what = "timed out" if returncode is None else f"exited with {returncode}"
        detail = (stderr or stdout).strip()
        super().__init__(f"command {' '.join(argv)!r} {what}" + (f": {detail}" if detail else ""))


class TopologyError(DtsError):
    """A topology could not be built or torn down."""


class AppError(DtsError):
    """An app did not start, did not print what it promised, or exited badly."""


class AppTimeout(AppError):
    """An app did not reach a marker or exit within its time limit (it was killed)."""


class ResultError(AppError):
    """The app's output has no valid ``RESULT {json}`` last line."""
