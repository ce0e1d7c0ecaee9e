# SPDX-License-Identifier: BSD-3-Clause
"""imago as a DPDK user gets it: ``meson install`` into a staging directory, then a program
built outside the tree with nothing but the installed headers, ``libimago.so`` and
``pkg-config --cflags --libs libimago``.

The program is the pub/sub example (``apps/examples/pubsub.c`` and its ``example.h``, copied
out of the tree), compiled with ``gcc -std=c11 -Wall -Wextra -Werror``, run embedded (two nodes
in the process, no hugepages) and as two secondary processes of the *installed* imagod. A few
lines of C++ check ``imago.hpp`` the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from framework.apps import REPO_ROOT, build_dir, result_line_object
from framework.imago_apps import (
    DeliveryResult, ExampleParams, ImagodRun, PublisherResult, cleanup_stale_hugepages, hugepages_missing_reason,
    run_to_completion, start_example,
)
from framework.testsuite import TestSuite, require
from framework.topology import Topology

EXAMPLE_SOURCES = ("pubsub.c", "reqresp.c", "group.c", "example.h")
MSGS = 200_000
SIZES = "16-2000"
INSTALL_S = 300
COMPILE_S = 120
RUN_S = 120

CXX_PROGRAM = r"""
#include <imago.hpp>
#include <cstdio>
#include <cstring>
// Two nodes in this process; 1000 messages from node 1's "cxx" to node 2's, through imago.hpp.
int main() {
  imago::Attachment im;
  if (int rc = im.embedded(); rc < 0) return std::printf("attach: %s\n", std::strerror(-rc)), 1;
  imago::Endpoint a, b;
  imago_ep_opts on2{.local_node = 2, .ring_size = 0, .reserved = 0};
  if (im.open("cxx", 2, a) < 0 || im.open("cxx", 1, b, &on2) < 0) return std::puts("open failed"), 1;
  unsigned sent = 0, got = 0, bad = 0;
  imago_msg m[32];
  while (got < 1000) {
    uint8_t buf[100];
    std::memset(buf, static_cast<int>(sent & 0xff), sizeof buf);
    if (sent < 1000 && a.send(buf) == 0) ++sent;
    int n = b.recv(m);
    for (int i = 0; i < n; ++i, ++got)
      bad += m[i].len != 100 || static_cast<uint8_t*>(imago_msg_data(&m[i]))[99] != (got & 0xff);
    if (n > 0) b.release({m, static_cast<size_t>(n)});
  }
  std::printf("cxx: sent %u received %u bad %u\n", sent, got, bad);
  return bad != 0;
}
"""


@dataclass
class Installed:
    """A staged install: DESTDIR @p root, and where things landed in it."""

    root: Path
    prefix: Path    #: <root>/<prefix>, e.g. <root>/usr/local
    libdir: Path    #: the directory of libimago.so
    pc: Path        #: libimago.pc
    bindir: Path
    pc_flags: list[str]  #: pkg-config --cflags --libs libimago, relocated into <root>

    def env(self) -> dict[str, str]:
        """The environment of a program linked against the staged libimago.so."""
        return dict(os.environ, LD_LIBRARY_PATH=str(self.libdir))


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found")
    return path


@pytest.fixture(scope="module")
def installed() -> Installed:
    """``meson install --destdir`` of the build into a fresh directory (removed afterwards)."""
    meson, pkg_config = _tool("meson"), _tool("pkg-config")
    _tool("gcc")
    if not (build_dir() / "build.ninja").exists():
        pytest.skip(f"{build_dir()} is not a configured build")
    root = Path(tempfile.mkdtemp(prefix="imago-install-"))
    try:
        cp = run_to_completion([meson, "install", "-C", str(build_dir()), "--destdir", str(root), "--no-rebuild"],
                               timeout=INSTALL_S)
        assert cp.returncode == 0, f"meson install failed ({cp.returncode}):\n{cp.stdout[-2000:]}\n{cp.stderr[-2000:]}"
        pcs = list(root.rglob("pkgconfig/libimago.pc"))
        assert len(pcs) == 1, f"want one libimago.pc under {root}, found {pcs}"
        pc = pcs[0]
        m = re.search(r"^prefix=(.*)$", pc.read_text(), re.M)
        assert m, f"{pc} has no prefix= line:\n{pc.read_text()}"
        prefix = root / m.group(1).lstrip("/")
        # The .pc names the final prefix (/usr/local); point it at the staged copy instead.
        cp = run_to_completion([pkg_config, f"--define-variable=prefix={prefix}", "--cflags", "--libs", "libimago"],
                               timeout=30, env=dict(os.environ, PKG_CONFIG_PATH=str(pc.parent)))
        assert cp.returncode == 0, f"pkg-config --cflags --libs libimago: {cp.stderr}"
        libs = list(root.rglob("libimago.so"))
        assert len(libs) == 1, f"want one libimago.so under {root}, found {libs}"
        yield Installed(root, prefix, libs[0].parent, pc, prefix / "bin", cp.stdout.split())
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _compile(inst: Installed, compiler: str, std: str, sources: list[Path], out: Path) -> None:
    argv = [compiler, f"-std={std}", "-Wall", "-Wextra", "-Werror", "-O2", "-o", str(out), *map(str, sources),
            *inst.pc_flags]
    cp = run_to_completion(argv, timeout=COMPILE_S)
    assert cp.returncode == 0, f"{' '.join(argv)} failed:\n{cp.stderr[-3000:]}"


@pytest.fixture(scope="module")
def built(installed: Installed) -> dict[str, Path]:
    """The examples and the C++ check, compiled out of the tree against the staged install."""
    src = installed.root / "src"
    src.mkdir()
    for f in EXAMPLE_SOURCES:
        shutil.copy(REPO_ROOT / "apps" / "examples" / f, src / f)
    (src / "check.cc").write_text(CXX_PROGRAM)
    out = {}
    for name in ("pubsub", "reqresp", "group"):
        out[name] = src / name
        _compile(installed, "gcc", "c11", [src / f"{name}.c"], out[name])
    if shutil.which("g++"):
        out["cxx"] = src / "check"
        _compile(installed, "g++", "c++20", [src / "check.cc"], out["cxx"])
    return out


class TestSuiteInstall(TestSuite):
    """The installed headers, library, pkg-config file and imagod, used from outside the tree."""

    def test_pkg_config_file(self, installed: Installed) -> None:
        """
        Steps:
            Read the staged libimago.pc and the flags pkg-config gives for it.
        Verify:
            The headers are installed under <includedir>/imago; Cflags adds that directory,
            Libs links -limago from the staged libdir and nothing else (libimago.so carries
            its DPDK dependencies itself, so no Requires of libdpdk is needed).
        """
        text = installed.pc.read_text()
        print(f"\n{installed.pc}:\n{text}pkg-config: {' '.join(installed.pc_flags)}")
        inc = installed.prefix / "include" / "imago"
        for h in ("imago.h", "imago_msg.h", "imago.hpp"):
            self.verify((inc / h).is_file(), f"{inc / h} not installed")
        self.verify(f"-I{inc}" in installed.pc_flags, f"no -I{inc} in {installed.pc_flags}")
        self.verify(f"-L{installed.libdir}" in installed.pc_flags and "-limago" in installed.pc_flags,
                    f"Libs do not link the staged libimago: {installed.pc_flags}")
        self.verify(not re.search(r"^Requires", text, re.M), f"libimago.pc has Requires:\n{text}")
        extra = [f for f in installed.pc_flags if not f.startswith(("-I", "-L", "-limago"))]
        self.verify(not extra, f"unexpected flags {extra}")

    def test_operators_tools_are_installed(self, installed: Installed) -> None:
        """
        Steps:
            Look in the staged install for the apps, imago-stat and the Wireshark dissector;
            run the installed imago-stat --help and tshark with the installed dissector.
        Verify:
            imagod, imago-perf and imago-stat are executables in <bindir>; imagod.service is
            in <prefix>/lib/systemd/system and systemd-analyze verify accepts it; imago.lua is in
            the folder this machine's Wireshark loads global Lua plugins from (tshark -G
            folders), and tshark loads it (its protocol list names imago).
        """
        for app in ("imagod", "imago-perf", "imago-stat"):
            p = installed.bindir / app
            self.verify(p.is_file() and os.access(p, os.X_OK), f"{p} not installed as an executable")
        cp = run_to_completion(["/usr/bin/python3", str(installed.bindir / "imago-stat"), "--help"], timeout=30)
        self.verify(cp.returncode == 0 and "--file-prefix" in cp.stdout, f"imago-stat --help: {cp.stderr}")
        unit = installed.prefix / "lib" / "systemd" / "system" / "imagod.service"
        self.verify(unit.is_file(), f"{unit} not installed")
        text = unit.read_text()
        final_bin = re.search(r"^ExecStart=(\S+)/imagod ", text, re.M)
        self.verify(final_bin is not None, f"no ExecStart of imagod in {unit}:\n{text}")
        analyze = shutil.which("systemd-analyze")
        if analyze:
            # The unit names the final prefix; check it against the staged imagod.
            staged = Path(tempfile.mkdtemp(prefix="imago-unit-")) / "imagod.service"
            staged.write_text(text.replace(final_bin.group(1) + "/imagod", str(installed.bindir / "imagod")))
            cp = run_to_completion([analyze, "verify", str(staged)], timeout=60)
            shutil.rmtree(staged.parent, ignore_errors=True)
            self.verify(cp.returncode == 0, f"systemd-analyze verify: {cp.stdout}{cp.stderr}")
        luas = list(installed.root.rglob("wireshark/plugins/imago.lua"))
        self.verify(len(luas) == 1, f"imago.lua installed {len(luas)} times: {luas}")
        lua = luas[0]
        tshark = shutil.which("tshark")
        if tshark:  # where this machine's Wireshark loads global Lua plugins from
            cp = run_to_completion([tshark, "-G", "folders"], timeout=60)
            glob_dir = next((l.split(":", 1)[1].strip() for l in cp.stdout.splitlines()
                             if l.startswith("Global Lua Plugins:")), None)
            self.verify(glob_dir is not None and str(lua) == str(installed.root) + glob_dir + "/imago.lua",
                        f"{lua} is not in Wireshark's global Lua plugin folder {glob_dir}")
        if tshark:
            cp = run_to_completion([tshark, "-G", "protocols", "-X", f"lua_script:{lua}"], timeout=60)
            self.verify(cp.returncode == 0 and "\tIMAGO\timago" in cp.stdout, f"tshark did not load {lua}: {cp.stderr}")

    def test_out_of_tree_program_runs_embedded(self, installed: Installed, built: dict[str, Path],
                                               topology: Topology) -> None:
        """
        Steps:
            Compile pubsub.c, reqresp.c and group.c (gcc -std=c11 -Wall -Wextra -Werror,
            pkg-config flags) and a C++20 program using imago.hpp; run each embedded with
            LD_LIBRARY_PATH at the staged libdir: pubsub both (200000 messages of 16..2000
            bytes), reqresp both (2000 round trips), group both (node 1 sends 50000 messages to
            group 7, node 2 receives it), the C++ check.
        Verify:
            They resolve libimago.so from the staging directory; pubsub delivers all 200000
            verified; reqresp gets all 2000 answers with ordered percentiles; the group's member
            delivers all 50000 verified, and its source saw it join; the C++ check sends and
            receives 1000 intact messages.
        """
        cp = run_to_completion(["ldd", str(built["pubsub"])], timeout=30, env=installed.env())
        self.verify(str(installed.libdir / "libimago.so.0") in cp.stdout, f"ldd:\n{cp.stdout}")
        node = topology.add_node("inst")
        run = start_example(node, "pubsub", ExampleParams(role="both", count=MSGS, size=SIZES, timeout_s=60),
                            binary=built["pubsub"], env=installed.env())
        res: DeliveryResult = run.result(RUN_S)
        print(f"\npubsub both: RESULT {res.raw}")
        self.verify(res.msgs_delivered == MSGS and res.clean, f"pubsub: {res.raw}")
        rr = start_example(node, "reqresp", ExampleParams(role="both", count=2000, timeout_s=30),
                           binary=built["reqresp"], env=installed.env()).result(RUN_S)
        print(f"reqresp both: RESULT {rr.raw}")
        rtt = rr.rtt_us()
        self.verify(rr.msgs_delivered == 2000 and rr.clean, f"reqresp: {rr.raw}")
        self.verify(rtt["p50"] <= rtt["p99"] <= rtt["p999"] <= rtt["max"], f"percentiles out of order: {rtt}")
        grp = node.start([str(built["group"]), "both", "--count", "50000", "--size", "16-2000", "--timeout", "30"],
                         name="group", env=installed.env())
        self.verify(grp.wait(RUN_S) == 0, f"group both failed:\n{grp.tail()}")
        lines = [result_line_object(l) for l in grp.lines("stdout") if l.startswith("RESULT ")]
        print(f"group both: RESULT {lines}")
        pub = next((r for r in lines if r.get("role") == "pub"), {})
        sub = next((r for r in lines if r.get("role") == "sub"), {})
        self.verify(pub.get("joined") == 1 and pub.get("msgs_sent") == 50000, f"group source: {pub}")
        self.verify(sub.get("msgs_delivered") == 50000 and sub.get("lost") == 0 and sub.get("duplicated") == 0
                    and sub.get("corrupted") == 0, f"group member: {sub}")
        if "cxx" not in built:
            pytest.skip("g++ not found: imago.hpp unchecked")
        proc = node.start([str(built["cxx"])], name="cxx", env=installed.env())
        self.verify(proc.wait(RUN_S) == 0, f"C++ check failed:\n{proc.tail()}")
        self.verify("cxx: sent 1000 received 1000 bad 0" in proc.lines("stdout"), f"C++ check:\n{proc.tail()}")

    def test_out_of_tree_program_runs_as_secondary(self, installed: Installed, built: dict[str, Path],
                                                   topology: Topology, request: pytest.FixtureRequest) -> None:
        """
        Steps:
            Start the staged imagod --pair (hugepages); run the out-of-tree pubsub as a
            subscriber on node 2 and a publisher on node 1, secondaries of that imagod
            (200000 messages of 16..2000 bytes); SIGTERM imagod.
        Verify:
            All 200000 delivered, none lost, duplicated, reordered or corrupted; imagod exits
            0 and says 'stopped cleanly'.
        """
        cleanup_stale_hugepages()
        require(hugepages_missing_reason())
        node = topology.add_node("inst")
        d = ImagodRun.start(node, f"{topology.prefix}-imagod", binary=installed.bindir / "imagod")
        request.addfinalizer(d.cleanup)
        d.wait_serving(30)
        params = dict(secondary=d.file_prefix, count=MSGS, size=SIZES, timeout_s=60)
        sub = start_example(node, "pubsub", ExampleParams(role="sub", node=2, **params), binary=built["pubsub"],
                            env=installed.env())
        sub.wait_ready(30)
        pub = start_example(node, "pubsub", ExampleParams(role="pub", node=1, **params), binary=built["pubsub"],
                            env=installed.env())
        pub_res: PublisherResult = pub.result(RUN_S)
        res: DeliveryResult = sub.result(RUN_S)
        print(f"\nsub: RESULT {res.raw}\npub: RESULT {pub_res.raw}")
        self.verify(pub_res.msgs_sent == MSGS, f"publisher: {pub_res.raw}")
        self.verify(res.msgs_delivered == MSGS and res.clean, f"subscriber: {res.raw}")
        rc = d.stop()
        self.verify(rc == 0 and d.stopped_cleanly(), f"imagod exit {rc}:\n{d.proc.tail()}")
