/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The kernel interface behind a port (net_af_packet, net_af_xdp): claiming it among imago
 * processes, and its promiscuous flag. Control path (files, ioctl).
 */
#pragma once

#include <string>

namespace imago::dp {

/**
 * Claim interface @p if_index of this network namespace for this process, until it ends: a
 * lock on /run/imago/iface-NETNS-NAME.lock, which the kernel drops when the process dies
 * however it ends (so a killed process's claim goes with it). Files no process holds (left
 * by processes that ended) are removed at each claim.
 * @return 0 claimed (or nothing to claim with: no /run), -EBUSY another live process holds it.
 */
int iface_claim(unsigned if_index);

/** @return 1 when interface @p if_index is in promiscuous mode, 0 when not, or a negative
 *  errno. */
int iface_promiscuous(unsigned if_index);

/** @return 1 when interface @p if_index is up with a carrier (IFF_UP and IFF_RUNNING), 0 when
 *  not, or a negative errno (-ENXIO: it was deleted; one made again since has another index). */
int iface_running(unsigned if_index);

/** net_af_packet could not open interface @p iface: @return why, as far as this process can
 *  tell (no such interface, no permission, or DPDK's fanout group number taken by another
 *  process), else a pointer to DPDK's own lines. Control path. */
std::string af_packet_open_failure(const std::string& iface);

/** @return why PMD (or vdev name) @p pmd could not open interface @p iface: the reason of
 *  af_packet_open_failure() for net_af_packet, else a pointer to DPDK's lines. */
std::string port_open_failure(const std::string& pmd, const std::string& iface);

}  // namespace imago::dp
