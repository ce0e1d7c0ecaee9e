# SPDX-License-Identifier: BSD-3-Clause
"""imago DTS framework: namespaces and veth as a testbed, typed wrappers around the apps."""
