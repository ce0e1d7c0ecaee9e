# SPDX-License-Identifier: BSD-3-Clause
"""Host commands the harness needs: ``ip`` (iproute2), ``sysctl``, process checks.

Every command runs through :func:`run_cmd`, which has a time limit and turns a failure into a
:class:`~framework.exceptions.CommandError` naming the argv, the exit code and stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from framework.exceptions import CommandError

#: Time limit of one host command (``ip``, ``sysctl``), in seconds.
CMD_TIMEOUT_S = 15.0


def _find(tool: str) -> str:
    found = shutil.which(tool)
    if found:
        return found
    for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin"):
        p = Path(d) / tool
        if p.exists():
            return str(p)
    return tool  # run_cmd reports "not found" with the tool's name


def ip_binary() -> str:
    """Path of ``ip`` from iproute2."""
    return _find("ip")


def run_cmd(
    argv: list[str], *, timeout: float = CMD_TIMEOUT_S, check: bool = True, stdin_text: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run @p argv to completion with a time limit (@p stdin_text, if given, is its input).

    Raises:
        CommandError: the tool is missing, timed out, or (with ``check``) exited non-zero.
    """
    try:
        cp = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout,
            **({"input": stdin_text} if stdin_text is not None else {"stdin": subprocess.DEVNULL}),
        )
    except FileNotFoundError as e:
        raise CommandError(argv, 127, "", f"{argv[0]}: not found ({e.strerror})") from None
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise CommandError(argv, None, out, err + f" (after {timeout:.0f} s)") from None
    if check and cp.returncode != 0:
        raise CommandError(argv, cp.returncode, cp.stdout, cp.stderr)
    return cp


def ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip [-n NETNS] ARGS...``."""
    argv = [ip_binary()]
    if netns is not None:
        argv += ["-n", netns]
    return run_cmd(argv + list(args), check=check)


def netns_exec_argv(netns: str, argv: list[str]) -> list[str]:
    """The argv that runs @p argv inside @p netns (``ip netns exec`` execs, it does not fork)."""
    return [ip_binary(), "netns", "exec", netns] + list(argv)


def netns_list() -> list[str]:
    """Names of the named network namespaces (``ip netns list``)."""
    out = ip("netns", "list").stdout
    # Lines look like "name" or "name (id: 3)".
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    """PIDs of the processes inside @p netns; empty when it does not exist."""
    cp = ip("netns", "pids", netns, check=False)
    if cp.returncode != 0:
        return []
    return [int(tok) for tok in cp.stdout.split() if tok.isdigit()]


def link_names(netns: str | None = None) -> list[str]:
    """Interface names in @p netns (None: the namespace we run in)."""
    data = json.loads(ip("-j", "link", "show", netns=netns).stdout or "[]")
    return [d["ifname"] for d in data]


def link_info(ifname: str, netns: str | None = None) -> dict:
    """``ip -j link show dev IFNAME`` as a dict (keys: ifname, address, mtu, operstate...)."""
    data = json.loads(ip("-j", "link", "show", "dev", ifname, netns=netns).stdout)
    return data[0]


def sysctl_in_netns(netns: str, settings: dict[str, str]) -> None:
    """Write sysctls inside @p netns through /proc/sys (``ip netns exec`` remounts /sys only)."""
    argv = [_find("sysctl"), "-q", "-w"] + [f"{k}={v}" for k, v in settings.items()]
    run_cmd(netns_exec_argv(netns, argv))


def is_root() -> bool:
    return os.geteuid() == 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
