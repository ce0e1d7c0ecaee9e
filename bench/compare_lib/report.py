# SPDX-License-Identifier: BSD-3-Clause
"""bench/compare's outputs: the CSV (one row per case), the Markdown table with ratios, and
the plots (latency against size as Pupa's Figure 3, bandwidth against size as its Figure 4)."""

from __future__ import annotations

import csv
from pathlib import Path

from compare_lib.plan import PLACE_API, PLACE_IMAGOD, PLACE_PAIR, PLACE_PEER, PLACE_PROCS, PLACE_RTC, RATIOS, RTT, SERIES, THROUGHPUT, Series

CSV_FIELDS = [
    "run_started", "size_bytes", "series", "label", "transport", "link", "test", "pattern", "wait",
    "placement", "status", "msgs_requested", "msgs_sent", "msgs_delivered", "not_delivered",
    "duration_s", "time_cap_s", "time_capped", "msgs_per_s", "gbps", "rtt_p50_us", "rtt_p90_us",
    "rtt_p99_us", "rtt_p999_us", "rtt_max_us", "frames_sent", "retransmits", "load1", "reason", "notes", "command", "logs",
]

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


# ------------------------------------------------------------------ CSV
def write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in CSV_FIELDS})


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _f(v) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------ Markdown
def fmt_size(n: int) -> str:
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def fmt_us(x: float, unit: bool = False) -> str:
    """Microseconds to a short string; values of a millisecond or more say "ms"."""
    if x >= 1000:
        return f"{x / 1000:.1f} ms"
    u = " us" if unit else ""
    if x >= 100:
        return f"{x:.0f}{u}"
    return f"{x:.1f}{u}"


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}×" if x >= 0.1 else f"{x:.2g}×"


class _Notes:
    """Footnotes of failed cells, numbered in order of first use."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def mark(self, text: str) -> str:
        if text not in self.items:
            self.items.append(text)
        return f"[{self.items.index(text) + 1}]"


def _index(rows: list[dict]) -> dict[tuple[str, str, int], dict]:
    return {(r["test"], r["series"], int(r["size_bytes"])): r for r in rows}


def _cell(r: dict | None, test: str, notes: _Notes) -> str:
    if r is None:
        return " "
    if r["status"] == SKIPPED:
        return "—"
    if r["status"] == FAILED:
        return "failed " + notes.mark(f"{r['label']}, {fmt_size(int(r['size_bytes']))}: {r['reason']}")
    if test == THROUGHPUT:
        return f"{fmt_rate(_f(r['msgs_per_s']))} ({_f(r['gbps']):.2f})"
    return f"{fmt_us(_f(r['rtt_p50_us']))} / {fmt_us(_f(r['rtt_p99_us']))}"


def _series_in(rows: list[dict], test: str) -> list[Series]:
    have = {r["series"] for r in rows if r["test"] == test}
    return [s for s in SERIES if s.test == test and s.key in have]


def _short_place(s: Series) -> str:
    return {PLACE_PROCS: "tx 0 / rx 1", PLACE_PAIR: "tx 1 / rx 0", PLACE_PEER: "not pinned",
            PLACE_API: "app 0 / engines 1", PLACE_IMAGOD: "app any / engines 1", PLACE_RTC: "all on 0"}[s.placement]


def markdown(rows: list[dict], sizes: list[int], title: str, meta_lines: list[str]) -> str:
    """The whole Markdown report: throughput, round trips, ratios, footnotes."""
    idx = _index(rows)
    notes = _Notes()
    head = "| " + " | ".join(fmt_size(s) for s in sizes) + " |"
    rule = "|" + "---:|" * len(sizes)
    out = [f"## {title}", ""]
    out += [f"- {line}" for line in meta_lines] + [""]

    out += ["### Throughput, one way: messages/s (Gbit/s of payload)", "",
            "| transport · link | lcores | wait " + head, "|---|---|---" + rule]
    for s in _series_in(rows, THROUGHPUT):
        cells = [_cell(idx.get((THROUGHPUT, s.key, z)), THROUGHPUT, notes) for z in sizes]
        out.append(f"| {s.label} | {_short_place(s)} | {s.wait} | " + " | ".join(cells) + " |")
    out.append("")

    out += ["### Round trip, one message outstanding: p50 / p99 (µs)", "",
            "| transport · link | lcores | wait " + head, "|---|---|---" + rule]
    for s in _series_in(rows, RTT):
        cells = [_cell(idx.get((RTT, s.key, z)), RTT, notes) for z in sizes]
        out.append(f"| {s.label} | {_short_place(s)} | {s.wait} | " + " | ".join(cells) + " |")
    out.append("")

    labels = {(s.test, s.key): s.label for s in SERIES}
    out += ["### Ratios imago / peer, and imago.h / imago-perf's engine loop (same run, same link)", "",
            "Throughput: above 1 favours imago. Round trip: below 1 favours imago.", "",
            "| ratio | better " + head, "|---|---" + rule]
    for test, metric, a, b in RATIOS:
        if (test, a) not in labels or (test, b) not in labels:
            continue
        if not any((test, a, z) in idx and (test, b, z) in idx for z in sizes):
            continue
        what = {"msgs_per_s": "msgs/s", "rtt_p50_us": "p50", "rtt_p99_us": "p99"}[metric]
        cells = []
        for z in sizes:
            ra, rb = idx.get((test, a, z)), idx.get((test, b, z))
            va = _f(ra[metric]) if ra and ra["status"] == OK else None
            vb = _f(rb[metric]) if rb and rb["status"] == OK else None
            cells.append(fmt_ratio(va / vb) if va and vb else "—")
        better = "> 1" if test == THROUGHPUT else "< 1"
        out.append(f"| {what}: {labels[(test, a)]} / {labels[(test, b)]} | {better} | " + " | ".join(cells) + " |")
    out.append("")
    if notes.items:
        out += ["Failed measurements:", ""]
        out += [f"{i + 1}. {t}" for i, t in enumerate(notes.items)]
        out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------ plots
_FAMILY_STYLE = {"imago": ("-", 2.4), "raw": (":", 1.6), "tcp": ("--", 1.6), "zmq": ("-.", 1.6)}
_COLORS = {
    "imago-veth": "#d62728", "imago-memif": "#ff7f0e", "imago-pair": "#8c564b",
    "imago-api-pair": "#393b79", "imago-api-imagod": "#637939", "imago-api-rtc": "#17becf", "imago-xdp": "#e7969c", "raw-xdp": "#c49c94",
    "raw-veth": "#e377c2", "raw-memif": "#bcbd22", "raw-pair": "#7f7f7f",
    "tcp-veth": "#1f77b4", "tcp-veth-spin": "#1f77b4", "tcp-veth-sleep": "#17becf",
    "zmq-tcp": "#2ca02c", "zmq-tcp-spin": "#2ca02c", "zmq-tcp-sleep": "#98df8a",
    "zmq-ipc": "#9467bd", "zmq-ipc-spin": "#9467bd", "zmq-ipc-sleep": "#c5b0d5",
}


def _line(ax, rows: list[dict], s: Series, metric: str, scale: float = 1.0) -> bool:
    pts = sorted((int(r["size_bytes"]), _f(r[metric])) for r in rows
                 if r["test"] == s.test and r["series"] == s.key and r["status"] == OK and _f(r[metric]))
    if not pts:
        return False
    ls, lw = _FAMILY_STYLE[s.family]
    marker = "o" if s.wait == "spin" else "s"
    face = _COLORS.get(s.key, "k") if s.wait == "spin" else "white"
    ax.plot([p[0] for p in pts], [p[1] * scale for p in pts], linestyle=ls, linewidth=lw, marker=marker,
            markersize=5, color=_COLORS.get(s.key, "k"), markerfacecolor=face, label=s.label)
    return True


def _axes(ax, sizes: list[int], ylabel: str, title: str) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.set_xticklabels([fmt_size(z) for z in sizes], rotation=0, fontsize=8)
    ax.minorticks_off()
    ax.set_xlim(min(sizes) / 1.5, max(sizes) * 1.5)
    ax.set_xlabel("message size")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)


def plot(rows: list[dict], sizes: list[int], out_dir: Path, footer: str) -> list[Path]:
    """Render latency.{png,svg} and bandwidth.{png,svg}; @return the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    figs = {
        "latency": (RTT, [("rtt_p50_us", "round trip p50 (µs)", "Median round trip (Pupa Fig. 3 style)", 1.0),
                          ("rtt_p99_us", "round trip p99 (µs)", "99th percentile round trip", 1.0)],
                    "Round trip against message size: one message outstanding, lower is better"),
        "bandwidth": (THROUGHPUT, [("gbps", "Gbit/s of payload", "Bandwidth (Pupa Fig. 4 style)", 1.0),
                                   ("msgs_per_s", "messages/s", "Message rate", 1.0)],
                      "One-way throughput against message size: higher is better"),
    }
    for name, (test, panels, suptitle) in figs.items():
        fig, axes = plt.subplots(1, len(panels), figsize=(14, 6.4))
        handles, labels = [], []
        for ax, (metric, ylabel, title, scale) in zip(axes, panels):
            for s in SERIES:
                if s.test == test:
                    _line(ax, rows, s, metric, scale)
            _axes(ax, sizes, ylabel, title)
            for h, l in zip(*ax.get_legend_handles_labels()):
                if l not in labels:
                    handles.append(h)
                    labels.append(l)
        fig.suptitle(suptitle, fontsize=13)
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8.5, frameon=False,
                   bbox_to_anchor=(0.5, 0.045))
        fig.text(0.5, 0.012, footer, ha="center", va="bottom", fontsize=8, color="#444444", wrap=True)
        fig.subplots_adjust(left=0.06, right=0.99, top=0.88, bottom=0.31, wspace=0.18)
        for ext in ("png", "svg"):
            p = out_dir / f"{name}.{ext}"
            fig.savefig(p, dpi=110)
            written.append(p)
        plt.close(fig)
    return written
