# SPDX-License-Identifier: BSD-3-Clause
"""Base class of the suites, after DPDK DTS's ``framework/test_suite.py``.

A suite is a file ``tests/TestSuite_<name>.py`` holding one class ``TestSuite<Name>(TestSuite)``
whose ``test_*`` methods each carry a docstring with ``Steps:`` and ``Verify:`` sections. The
methods get their testbed from fixtures (``topology``, ``perf_binary``) and drive apps only
through the typed wrappers in :mod:`framework.apps`; checks go through :meth:`TestSuite.verify`.
"""

from __future__ import annotations

import os

import pytest


class VerifyError(AssertionError):
    """A ``Verify:`` step of a suite did not hold."""


class TestSuite:
    """Base of every suite. It has no tests of its own, so pytest collects nothing from it."""

    @staticmethod
    def verify(condition: bool, failure_description: str) -> None:
        """Fail the test with @p failure_description unless @p condition holds."""
        if not condition:
            raise VerifyError(failure_description)


def require(reason: str | None) -> None:
    """Go on when @p reason is None; otherwise skip the test with it, printed. Under CI
    (``CI=true``) fail instead: there the project's own scripts set up what a suite needs
    (hugepages, namespaces), so a missing piece is a defect, not a reason to test less."""
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (under CI the scripts must set this up)")
    pytest.skip(reason)
