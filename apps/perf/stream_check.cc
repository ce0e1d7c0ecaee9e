// SPDX-License-Identifier: BSD-3-Clause
#include "apps/perf/stream_check.h"

#include <cinttypes>
#include <cstdio>

namespace imago::perf {

void print_delivery(const StreamCheck& c, uint64_t sent, double secs) {
  std::printf("Node B's application received %" PRIu64 " messages: %" PRIu64 " missing, %" PRIu64
              " duplicated, %" PRIu64 " out of order, %" PRIu64 " corrupted.\n",
              c.delivered, sent > c.delivered ? sent - c.delivered : 0, c.duplicated, c.reordered, c.corrupted);
  std::printf("Rate: %.2f million messages/s, %.3f Gbit/s of payload, over %.3f s.\n",
              secs > 0 ? c.delivered / secs / 1e6 : 0.0, secs > 0 ? c.bytes * 8 / secs / 1e9 : 0.0, secs);
}

void stream_json(const StreamCheck& c, uint64_t sent, double secs, bool receiver_here, app::Json& r,
                 uint64_t tsc_hz) {
  r.num("msgs_sent", sent).num("msgs_delivered", c.delivered).num("bytes_delivered", c.bytes)
      .num("duration_s", secs).num("msgs_per_s", secs > 0 ? c.delivered / secs : 0.0)
      .num("gbps", secs > 0 ? c.bytes * 8 / secs / 1e9 : 0.0)
      .num("lost", receiver_here && sent > c.delivered ? sent - c.delivered : 0)
      .num("duplicated", c.duplicated).num("reordered", c.reordered).num("corrupted", c.corrupted);
  if (receiver_here && tsc_hz != 0) r.num("max_gap_us", static_cast<double>(c.max_gap_tsc) * 1e6 / static_cast<double>(tsc_hz));
}

}  // namespace imago::perf
