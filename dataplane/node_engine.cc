// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/node_engine.h"

#include <rte_cycles.h>

#include <cinttypes>

#include "dataplane/log.h"
#include "dataplane/node_port.h"

namespace imago::dp {

namespace {

// The engine, or -EINVAL with the reason logged: a node refused for its settings says why.
int create_engine(NodeEngine& e, const rel::Config& ec, rel::FrameSink* sink, rel::AppSink* app) {
  const int rc = rel::Engine::create(ec, sink, app, &e.engine);
  if (const char* why = rc == -EINVAL ? rel::config_problem(ec) : nullptr; why != nullptr)
    IMAGO_LOG(ERR, dataplane, "node %" PRIu64 ": engine settings refused: %s (mtu %u, largest message %u)\n",
              static_cast<uint64_t>(ec.node_id), why, ec.mtu, static_cast<unsigned>(ec.max_message_size));
  return rc;
}

// A fabric node: its engine on a CircuitLink over its topology's ports.
int open_fabric_node(NodeEngine& e, const NodeEngineConfig& c, rel::Config ec, rel::AppSink* app) {
  if (c.port_b != nullptr || ec.mtu <= sizeof(rel::circ::CircuitHeader)) return -EINVAL;
  ec.mtu -= static_cast<uint32_t>(sizeof(rel::circ::CircuitHeader));
  e.circ = std::make_unique<CircuitLink>();
  if (int rc = e.circ->init(*c.circuits, ec.node_id, c.encap, c.burst, ec.seed ^ 0xC1C1, ec.mtu); rc < 0) return rc;
  if (int rc = create_engine(e, ec, &e.circ->sink(), app); rc < 0) return rc;
  e.circ->attach(e.engine.get());
  return 0;
}

int open_node(NodeEngine& e, FaultyPort& port, rte_mempool* pool, const NodeEngineConfig& c, rel::AppSink* app) {
  rel::Config ec = c.engine;
  stamp_incarnation(ec, c.id);
  if (c.circuits != nullptr) return open_fabric_node(e, c, ec, app);
  if (int rc = e.link.init(port, pool, c.encap, c.burst); rc < 0) return rc;
  rel::FrameSink* sink = &e.link;
  if (c.port_b != nullptr) {
    if (c.encap_b.kind != c.encap.kind || c.encap_b.auth.has_value() != c.encap.auth.has_value() ||
        ec.mtu <= sizeof(rel::red::Shim))
      return -EINVAL;
    if (int rc = e.link_b.init(*c.port_b, c.pool_b, c.encap_b, c.burst); rc < 0) return rc;
    ec.mtu -= static_cast<uint32_t>(sizeof(rel::red::Shim));
    rel::red::fit_engine(c.redundancy, &ec);
    rel::red::Config rc = c.redundancy;
    rc.max_frame = ec.mtu;
    e.set = std::make_unique<rel::red::LinkSet>(rc, ec.node_id, static_cast<uint32_t>(ec.seed ^ (ec.seed >> 32)),
                                                &e.link, &e.link_b);
    sink = e.set.get();
  }
  if (int rc = create_engine(e, ec, sink, app); rc < 0) return rc;
  e.link.attach(e.engine.get());
  if (e.set) {
    e.link_b.attach(e.engine.get());
    e.set->attach(e.engine.get());
    e.link.attach_set(e.set.get(), 0);
    e.link_b.attach_set(e.set.get(), 1);
  }
  return 0;
}

}  // namespace

int node_engine_open(NodeEngine& e, FaultyPort& port, rte_mempool* pool, const NodeEngineConfig& c,
                     rel::AppSink* app) {
  e.clock = TscClock(rte_get_tsc_hz());
  const int rc = open_node(e, port, pool, c, app);
  const auto tsc = [](uint64_t ns) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(ns) * rte_get_tsc_hz() / 1'000'000'000);
  };
  if (rc == 0) e.absence_tol_tsc = tsc(e.engine->absence_tolerance_ns());
  if (rc == 0 && e.set) e.set_tol_tsc = tsc(e.set->absence_tolerance_ns());
  return rc;
}

int node_engine_add_peer(NodeEngine& e, rel::NodeId peer, const MacAddr& mac, uint32_t ip,
                         const MacAddr& mac_b, uint32_t ip_b) {
  const uint64_t now_tsc = rte_rdtsc(), now = e.clock.ns(now_tsc);
  // The peer's silence counts from now: so does the time until the first poll (a
  // run-to-completion application that sets up at length before it polls).
  if (e.last_poll_tsc == 0) e.last_poll_tsc = now_tsc;
  if (e.circ) {
    if (int rc = e.circ->add_peer(peer, now); rc < 0) return rc;
    return e.engine->add_peer(peer, now);
  }
  if (int rc = e.link.add_peer_addr(peer, mac, ip); rc < 0) return rc;
  if (e.set) {
    if (int rc = e.link_b.add_peer_addr(peer, mac_b, ip_b); rc < 0) return rc;
    if (int rc = e.set->add_peer(peer, now); rc < 0) return rc;
  }
  return e.engine->add_peer(peer, now);
}

void node_engine_publish_to(NodeEngine& e, StatsBoard* board, uint64_t node_id) {
  e.pub = BoardPublisher{.board = board, .node_id = node_id, .period_tsc = rte_get_tsc_hz() / 1000, .next_tsc = 0};
}

void node_engine_log_settings(uint64_t self, rel::NodeId peer, rel::PeerSettings theirs, rel::PeerSettings ours) {
  if (theirs.mtu != ours.mtu) {
    // The engine's frame size follows --mtu less the encapsulation, the --auth-key tag, the
    // redundancy shim and the circuit header: any of them may differ.
    IMAGO_LOG(ERR, dataplane,
              "node %" PRIu64 ": peer %u sends and takes frames of %u bytes, this node %u: no session until both "
              "have the same --mtu, encapsulation, --auth-key and networks (reject settings_mismatch)\n",
              self, peer, theirs.mtu, ours.mtu);
    return;
  }
  IMAGO_LOG(ERR, dataplane,
            "node %" PRIu64 ": peer %u takes messages of at most %u bytes (an imago.h node: its --max-message and a "
            "4-byte endpoint tag), and this node queued a larger one for it before their session: no session until "
            "it takes it (reject settings_mismatch)\n",
            self, peer, theirs.max_message);
}

}  // namespace imago::dp
