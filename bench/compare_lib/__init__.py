# SPDX-License-Identifier: BSD-3-Clause
"""The parts of bench/compare: what to measure (plan), how (runners), and the report
(CSV, Markdown table, plots). bench/compare itself only wires them together."""
