// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/circuit_link.h"

#include <rte_cycles.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <string>
#include <utility>

#include "dataplane/log.h"

namespace imago::dp {

namespace circ = rel::circ;

int CircuitLink::init(const CircuitSetup& s, rel::NodeId self, const EncapConfig& encap, uint16_t burst,
                      uint64_t seed, uint32_t max_frame) {
  const int me = s.topology.node_index(self);
  if (encap.kind != Encap::L2 || s.ports.empty() || s.ports.size() > kMaxPorts || me < 0 || burst == 0 ||
      burst > TxQueue::kMaxBurst)
    return -EINVAL;
  for (const circ::PortLink& pl : s.topology.ports(static_cast<size_t>(me)))
    if (pl.port >= s.ports.size() || s.ports[pl.port].port == nullptr) return -EINVAL;
  self_ = self;
  topo_ = s.topology;
  dead_.assign(topo_.links().size(), false);
  compute_routes();
  burst_ = burst;
  clock_ = TscClock(rte_get_tsc_hz());
  ports_ = std::vector<Port>(s.ports.size());
  for (size_t i = 0; i < s.ports.size(); ++i) {
    Port& p = ports_[i];
    p.port = s.ports[i].port, p.pool = s.ports[i].pool;
    p.encap = encap;
    p.encap.src_mac = s.ports[i].mac;
    p.encap.dst_mac = kBroadcastMac;
    if (p.port != nullptr) p.tx.init(p.port, burst, rte_get_tsc_hz());
  }
  circ::CircuitSink::Config sc = s.sink;
  sc.max_frame = max_frame;
  sink_ = std::make_unique<circ::CircuitSink>(sc, self, &routes_, seed, this, this);
  now_tsc_ = rte_rdtsc();
  health_cfg_ = s.health;  // the links' clocks start at the first poll(), not here
  max_wait_ns_ = s.max_wait_ns;
  for (circ::PortId i = 0; i < ports_.size(); ++i) init_hello(i);
  show_routes_ = s.show_routes;
  show_routes("at start");
  return 0;
}

void CircuitLink::init_hello(circ::PortId p) {
  circ::HelloBody b;
  b.node.set(static_cast<uint32_t>(self_));
  b.port.set(p);
  constexpr uint32_t kVci[3] = {circ::kHelloDeaf, circ::kHelloHears, circ::kHelloLeaving};
  for (int i = 0; i < 3; ++i) {
    uint8_t* f = ports_[p].hello[i];
    circ::circ_header(f, circ::CircKind::kHello, kVci[i]);
    std::memcpy(f + sizeof(circ::CircuitHeader), &b, sizeof b);
    circ::circ_seal(f, sizeof b);
  }
  const int li = topo_.link_index(self_, p);
  if (li < 0) return;
  const circ::Link& l = topo_.links()[static_cast<size_t>(li)];
  const bool a = l.a == self_ && l.pa == p;
  ports_[p].expect_node = a ? l.b : l.a;
  ports_[p].expect_port = a ? l.pb : l.pa;
}

// A neighbour other than the topology's: nothing else on the wire would tell (circuits would
// just fail, or go the wrong way). Said once, and again when it is right. Taken as a miswire
// at the second such HELLO in a row, and only once the port sent --link-miss HELLOs: a packet
// socket queues any interface's frames until it is bound to its own, so a port's first
// frames may come from another link of the node (an outside tester: two in a row, an ERR at
// 1 start in 11 of correctly wired nodes with two ports).
void CircuitLink::on_hello(circ::PortId p, std::span<const uint8_t> frame, uint64_t now) {
  constexpr uint8_t kWrongInRow = 2;
  ++cc_.hellos_in;
  circ::HelloBody b;
  std::memcpy(&b, frame.data() + sizeof(circ::CircuitHeader), sizeof b);
  // Our own name: our frames come back (a loop, or replayed to us, which a cluster key lets
  // through). Neither the neighbour nor another node: it says nothing of the link.
  if (b.node.get() == self_) return void(++cc_.own_hellos);
  Port& port = ports_[p];
  const bool right = b.node.get() == port.expect_node && b.port.get() == port.expect_port;
  if (!right) ++cc_.wrong_neighbour;
  port.wrong_in_row = right ? 0 : static_cast<uint8_t>(std::min<int>(port.wrong_in_row + 1, kWrongInRow));
  if (!right && (port.wrong_in_row < kWrongInRow || !health_.settled(p))) return;
  // The link is down while the wrong node answers (routes go round it, circuits through it
  // are torn down: a frame sent there would reach a node that does not expect it), and while
  // the right one hears nothing of us (one way only: it routes round it, so must we).
  const bool was = health_.up(p);
  const uint32_t says = circ::circ_vci(frame.data());
  if (right && says == circ::kHelloLeaving) {
    health_.peer_left(p);
    ++cc_.neighbours_left;
  } else if (right) {
    health_.heard(p);
    port.heard_once = true;
    health_.peer_hears(p, says != circ::kHelloDeaf);
  } else {
    health_.force_down(p);
  }
  if (health_.up(p) != was) link_changed(p, !was, now, says == circ::kHelloLeaving ? " (its node stopped)" : "");
  if (right == !port.miswired) return;
  port.miswired = !right;
  if (!loud(p, port.miswire_log, "miswire", now)) return;
  if (right)
    IMAGO_LOG(NOTICE, dataplane, "node %" PRIu64 ": port %u: node %" PRIu64 " answers, as the topology says\n",
              static_cast<uint64_t>(self_), p, static_cast<uint64_t>(port.expect_node));
  else
    IMAGO_LOG(ERR, dataplane, "node %" PRIu64 ": port %u: node %u (its port %u) answers where the topology has node %"
              PRIu64 " (its port %u): check --topology, --node-id and the --vdev order of both nodes\n",
              static_cast<uint64_t>(self_), p, b.node.get(), b.port.get(), static_cast<uint64_t>(port.expect_node),
              port.expect_port);
}

int CircuitLink::add_peer(rel::NodeId peer, uint64_t now) {
  if (!topo_.has_node(peer) || peer == self_) return -EINVAL;
  if (int rc = sink_->add_peer(peer, now); rc < 0) return rc;
  last_down_.emplace_back(peer, circ::CircReason::kNone);
  return 0;
}

bool CircuitLink::send(circ::PortId port, std::span<const uint8_t> frame) {
  return send_parts(port, frame, {}) != 0;
}

int CircuitLink::send_parts(circ::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> body) {
  if (port >= ports_.size() || ports_[port].port == nullptr) return 1;  // no such link: lost
  Port& p = ports_[port];
  if (!p.tx.room(now_tsc_)) {
    ++lc_.tx_backpressure;
    return 0;
  }
  const size_t hdr = encap_header_len(p.encap.kind), len = head.size() + body.size();
  rte_mbuf* m = rte_pktmbuf_alloc(p.pool);
  if (m == nullptr || hdr + len + encap_trailer_len(p.encap) > rte_pktmbuf_tailroom(m)) {
    ++lc_.alloc_failed;
    rte_pktmbuf_free(m);
    return 0;
  }
  auto* data = rte_pktmbuf_mtod(m, uint8_t*);
  std::memcpy(data + hdr, head.data(), head.size());
  if (!body.empty()) std::memcpy(data + hdr + head.size(), body.data(), body.size());
  const size_t n = encode_frame(p.encap, data, LinkType::Circuit, static_cast<uint16_t>(len));
  m->data_len = static_cast<uint16_t>(n);
  m->pkt_len = static_cast<uint32_t>(n);
  p.tx.push(m);
  return 1;
}

unsigned CircuitLink::receive(uint64_t now_tsc) {
  now_tsc_ = now_tsc;
  const uint64_t now = clock_.ns(now_tsc);
  sink_->set_now(now);
  unsigned n = 0;
  rte_mbuf* pkts[TxQueue::kMaxBurst];
  for (circ::PortId p = 0; p < ports_.size(); ++p) {
    Port& in = ports_[p];
    if (in.port == nullptr || !drain(p, now)) continue;  // still waiting: this link is pushed back
    const uint16_t k = in.port->rx_burst(pkts, burst_, now_tsc);
    n += k;
    for (uint16_t i = 0; i < k; ++i) {
      if (on_mbuf(p, pkts[i], now)) continue;
      // The next link of a frame has no room: it waits, and the rest of the burst behind it
      // (FIFO per circuit), and this link is read no more until it moves.
      std::memcpy(in.rest, pkts + i + 1, (k - i - 1) * sizeof(rte_mbuf*));
      in.rest_n = static_cast<uint16_t>(k - i - 1), in.rest_at = 0;
      ++cc_.pushbacks;
      break;
    }
  }
  return n;
}

// What an input link kept while pushed back, in order. @return true once all of it moved.
bool CircuitLink::drain(circ::PortId p, uint64_t now) {
  Port& in = ports_[p];
  if (in.waiting.m != nullptr) {
    if (!forward(p, in.waiting, now)) return false;
    in.waiting.m = nullptr;
  }
  while (in.rest_at < in.rest_n)
    if (!on_mbuf(p, in.rest[in.rest_at++], now)) return false;
  return true;
}

// One received frame: ours to free, unless it is forwarded (the next port frees it).
// @return false when it waits for room on its next link (Port::waiting).
bool CircuitLink::on_mbuf(circ::PortId p, rte_mbuf* m, uint64_t now) {
  DecodedFrame f;
  auto* data = rte_pktmbuf_mtod(m, uint8_t*);
  if (!decode_frame(ports_[p].encap, data, rte_pktmbuf_data_len(m), f, lc_.decode)) return rte_pktmbuf_free(m), true;
  if (f.type != LinkType::Circuit) {
    ++lc_.not_ours;
    return rte_pktmbuf_free(m), true;
  }
  ++lc_.frames_in;
  const std::span<const uint8_t> frame(f.payload, f.payload_len);
  circ::CircuitHeader h;
  const bool good = circ_read(frame, &h);
  if (good && h.kind == static_cast<uint8_t>(circ::CircKind::kHello)) {
    on_hello(p, frame, now);
    return rte_pktmbuf_free(m), true;
  }
  if (ports_[p].miswired) {  // from a node the topology does not put there: not ours to take
    ++cc_.wrong_neighbour;
    return rte_pktmbuf_free(m), true;
  }
  ports_[p].heard_once = true;
  if (health_.heard(p)) link_changed(p, true, now);
  if (!good || h.kind != static_cast<uint8_t>(circ::CircKind::kData)) {
    sink_->on_frame(p, frame, now);  // control, or junk (counted there)
    return rte_pktmbuf_free(m), true;
  }
  circ::PortId out;
  uint32_t vci;
  circ::CircuitId local;
  switch (sink_->node().route_data(p, h.vci.get(), now, &out, &vci, &local)) {
    case circ::CircuitNode::Verdict::kForward:
      return forward(p, Hop{m, const_cast<uint8_t*>(f.payload), f.payload_len, out, vci, now}, now);
    case circ::CircuitNode::Verdict::kLocal:
      current_ = m;  // the engine may keep units in place (a reference on the mbuf)
      sink_->deliver(local, frame.subspan(sizeof(circ::CircuitHeader)), now);
      current_ = nullptr;
      break;
    case circ::CircuitNode::Verdict::kDrop: break;  // counted (unknown_vci)
  }
  rte_pktmbuf_free(m);
  return true;
}

// In place: the next hop's VCI and the header's CRC, our link header for the next port (and
// the tag, with a key), and the same mbuf goes out. One with no room keeps it waiting on
// input link @p in (push-back) up to max_wait_ns; a next link that is down (or none), or still
// full after that, loses it (the ends repair): a wait that ends, so a cycle of full links
// cannot hold every one of them for ever.
bool CircuitLink::forward(circ::PortId in, const Hop& h, uint64_t now) {
  const bool gone = h.out >= ports_.size() || ports_[h.out].port == nullptr || !health_.up(h.out);
  const bool room = !gone && ports_[h.out].tx.room(now_tsc_);
  if (!gone && !room && now - h.since <= max_wait_ns_) {
    ports_[in].waiting = h;
    return false;
  }
  if (!room) {
    ++cc_.forward_dropped;
    rte_pktmbuf_free(h.m);
    return true;
  }
  Port& o = ports_[h.out];
  circ::circ_rewrite_vci(h.frame, h.vci);
  auto* data = rte_pktmbuf_mtod(h.m, uint8_t*);
  if (o.encap.auth) {  // a new tag over the new header: the whole link encapsulation again
    const size_t n = encode_frame(o.encap, data, LinkType::Circuit, h.len);
    h.m->data_len = static_cast<uint16_t>(n);  // Ethernet padding of a short frame is left behind
    h.m->pkt_len = static_cast<uint32_t>(n);
  } else {  // the same to the broadcast address, the same link header: only our address changes
    std::memcpy(data + offsetof(EthHdr, src), o.encap.src_mac.b.data(), 6);
  }
  h.m->port = o.port->port();
  o.tx.push(h.m);
  return true;
}

unsigned CircuitLink::poll(uint64_t now) {
  if (health_.ports() != ports_.size()) health_.init(health_cfg_, ports_.size(), now);
  unsigned work = 0;
  for (circ::PortId p = 0; p < ports_.size(); ++p) {
    if (ports_[p].port == nullptr) continue;
    if (health_.went_down(p)) link_changed(p, false, now), ++work;
    if (uint64_t quiet; ports_[p].link_log.due(now, &quiet)) log_link(p, " (as it is now)", quiet);
    // A link we stopped reading (pushed back) hears nothing: its HELLOs are not counted.
    if (!health_.hello_due(p, now, ports_[p].waiting.m == nullptr)) continue;
    if (send(p, ports_[p].hello[health_.hears(p)])) ++cc_.hellos_sent, ++work;
  }
  sink_->poll(now);
  if (routes_log_.due(now)) show_routes("changes held back since the last table");
  return work;
}

unsigned CircuitLink::leave() {
  set_now(rte_rdtsc());
  const unsigned closed = sink_->close_all(clock_.ns(now_tsc_));
  for (circ::PortId p = 0; p < ports_.size(); ++p)  // behind the TEARDOWNs: they pass first
    if (ports_[p].port != nullptr) send(p, ports_[p].hello[2]);
  const uint64_t until = rte_rdtsc() + rte_get_tsc_hz() / 1000;
  const auto pending = [this] {
    for (const Port& p : ports_)
      if (p.port != nullptr && p.tx.pending() != 0) return true;
    return false;
  };
  do {
    flush(rte_rdtsc());
  } while (pending() && rte_rdtsc() < until);
  IMAGO_LOG(NOTICE, dataplane, "node %" PRIu64 ": leaving the fabric: %u circuit(s) closed, neighbours told\n",
            static_cast<uint64_t>(self_), closed);
  return closed;
}

unsigned CircuitLink::flush(uint64_t now_tsc) {
  unsigned n = 0;
  for (Port& p : ports_)
    if (p.port != nullptr) n += p.tx.flush(now_tsc);
  return n;
}

// A link went silent (or spoke again): route without it (or with it), and tear down every
// circuit through it toward both ends. Rare, and the lcore's only allocation: a new table.
void CircuitLink::link_changed(circ::PortId p, bool up, uint64_t now, const char* why) {
  ++(up ? cc_.links_up : cc_.links_down);
  HeldLine& line = ports_[p].link_log;
  // A port starts up on trust: its first fall, before anything was heard on it, is a
  // neighbour not there yet. Said as such, outside the gate, so that the line when the
  // neighbour comes is not held back for the gap.
  if (!up && !ports_[p].heard_once) log_link(p, " (nothing heard on it since the start)", 0);
  else if (line.changed(now, cc_.log_quiet)) log_link(p, why, std::exchange(line.gate.quiet, 0));
  const int li = topo_.link_index(self_, p);
  if (li >= 0) {
    dead_[static_cast<size_t>(li)] = !up;
    compute_routes();
    ++cc_.route_changes;
    if (routes_log_.changed(now, cc_.log_quiet)) show_routes(up ? "a link came back" : "a link went down");
  }
  if (!up) sink_->node().link_down(p, now);
}

void CircuitLink::log_link(circ::PortId p, const char* why, uint64_t quiet) {
  if (quiet != 0)
    IMAGO_LOG(NOTICE, dataplane, "node %" PRIu64 ": port %u: %" PRIu64 " link changes not logged\n",
              static_cast<uint64_t>(self_), p, quiet);
  IMAGO_LOG(NOTICE, dataplane, "node %" PRIu64 ": link on port %u %s%s\n", static_cast<uint64_t>(self_), p,
            health_.up(p) ? "up" : "down", why);
}

// @return whether a line of @p gate may be logged now; first says how many were not.
bool CircuitLink::loud(circ::PortId p, LogGate& gate, const char* what, uint64_t now) {
  if (!gate.open(now, cc_.log_quiet)) return false;
  if (gate.quiet != 0)
    IMAGO_LOG(NOTICE, dataplane, "node %" PRIu64 ": port %u: %" PRIu64 " %s changes not logged\n",
              static_cast<uint64_t>(self_), p, gate.quiet, what);
  gate.quiet = 0;
  return true;
}

// The table again, and its first rows as telemetry shows them (copied on every publish).
void CircuitLink::compute_routes() {
  routes_.compute(topo_, self_, dead_);
  stats_.reachable = static_cast<uint32_t>(routes_.reachable());
  stats_.n_routes = 0;
  routes_.for_each([this](rel::NodeId dst, const circ::Route& r) {
    if (stats_.n_routes < CircuitStats::kMaxRoutes)
      stats_.routes[stats_.n_routes++] = {dst, r.next, r.port, static_cast<uint16_t>(r.hops)};
  });
}

// One write for the whole table: the main thread's counters lines, on the same stdout, would
// otherwise fall between its lines and cut it in two for whoever reads it.
void CircuitLink::show_routes(const char* why) {
  if (show_routes_ == nullptr) return;
  std::string out = "routes of node " + std::to_string(self_) + " (" + why + "):\n";
  const std::string t = circ::format_routes(routes_);
  if (t.empty()) out += "  (none: no node is reachable, no link of ours is up)\n";
  size_t at = 0;
  while (at < t.size()) {
    const size_t nl = t.find('\n', at);
    const size_t end = nl == std::string::npos ? t.size() : nl;
    out.append("  ").append(t, at, end - at).append("\n");
    at = end + 1;
  }
  std::fwrite(out.data(), 1, out.size(), show_routes_);
  std::fflush(show_routes_);
}

bool CircuitLink::told_down(rel::NodeId peer, circ::CircReason why) {
  for (auto& [id, last] : last_down_) {
    if (id != peer) continue;
    const bool told = last == why;
    last = why;
    return told;
  }
  return false;
}

void CircuitLink::on_circuit_up(circ::CircuitId, rel::NodeId peer, bool origin) {
  ++cc_.circuits_up;
  told_down(peer, circ::CircReason::kNone);
  IMAGO_LOG(NOTICE, dataplane, "node %" PRIu64 ": circuit to node %" PRIu64 " up (%s)\n",
            static_cast<uint64_t>(self_), static_cast<uint64_t>(peer), origin ? "opened" : "accepted");
}

void CircuitLink::on_circuit_down(circ::CircuitId, rel::NodeId peer, circ::CircReason why) {
  ++cc_.circuits_down;
  if (told_down(peer, why)) return;
  IMAGO_LOG(NOTICE, dataplane, "node %" PRIu64 ": circuit to node %" PRIu64 " down: %s\n",
            static_cast<uint64_t>(self_), static_cast<uint64_t>(peer), circ::reason_name(why));
}

const EngineLinkCounters& CircuitLink::link_counters() {
  lc_.frames_out = 0, lc_.tx_backoffs = 0;
  for (const Port& p : ports_) lc_.frames_out += p.tx.frames_out(), lc_.tx_backoffs += p.tx.backoffs();
  return lc_;
}

const CircuitStats& CircuitLink::stats() {
  stats_.node = sink_->node().counters();
  stats_.sink = sink_->counters();
  stats_.link = cc_;
  stats_.in_use = sink_->node().in_use();
  stats_.ports_up = 0;
  stats_.n_links = static_cast<uint32_t>(std::min<size_t>(ports_.size(), CircuitStats::kMaxLinks));
  for (circ::PortId p = 0; p < ports_.size(); ++p) {
    const bool up = ports_[p].port != nullptr && health_.up(p);
    stats_.ports_up += up;
    if (p < CircuitStats::kMaxLinks) stats_.link_up[p] = up;
  }
  return stats_;  // the routes: compute_routes()'s
}

CircuitLink::~CircuitLink() {
  for (Port& p : ports_) {
    if (p.waiting.m != nullptr) rte_pktmbuf_free(p.waiting.m);
    while (p.rest_at < p.rest_n) rte_pktmbuf_free(p.rest[p.rest_at++]);
    if (p.port != nullptr) p.tx.drop_all();
  }
}

}  // namespace imago::dp
