/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * imago: reliable, in-order, exactly-once message streams over DPDK. The public C API.
 *
 * An application attaches once, either embedded (the nodes and their engine lcores run in
 * the calling process) or as a DPDK secondary process of a running imagod. It then opens
 * endpoints. An endpoint is a named stream between this node and one peer node: messages
 * sent on endpoint "orders" to node 2 arrive at node 2's endpoint "orders" opened towards
 * this node. Messages travel over two single-producer/single-consumer rte_rings per
 * endpoint (application -> engine, engine -> application), moved in bursts.
 *
 * Threads: each endpoint is used by one thread at a time (its rings are single-producer,
 * single-consumer). Different endpoints may be used by different threads. A data-path call
 * (imago_send(), imago_send_burst(), imago_buf_alloc(), imago_send_zc(), imago_buf_free(),
 * imago_recv_burst(), imago_release()) made while another thread is inside one of them on
 * the same endpoint is refused with -EBUSY and counted (imago_ep_stats.calls_busy): nothing
 * is lost or corrupted, and the call may be made again once the other has returned.
 *
 * Back-pressure, never loss: a send that finds the tx ring full returns -EAGAIN (or a
 * short count for a burst); nothing is dropped. A reader that does not drain its endpoint
 * fills its rx ring, the engine then stops taking that peer's messages and the peer's
 * sender is slowed by the protocol's credits.
 *
 * A message sent before the peer's endpoint is open waits in the tx ring: the engine moves
 * it only once the peer announced the endpoint. Messages that reach a node where the
 * endpoint has been closed meanwhile (its application exited or was killed) are dropped
 * there and counted by that node (imagod's periodic line, field no_endpoint).
 *
 * Errors are negative errno values, listed on each function (a NULL @p out or @p st is
 * -EINVAL everywhere). No function blocks except imago_wait() (up to its timeout), the
 * control path: imago_open(), imago_group_open(), imago_close() and imago_detach(), and the
 * attaches: imago_attach_embedded() while EAL and the nodes start; imago_attach_secondary()
 * while EAL starts as a secondary (seconds when the imagod there does not run its control
 * thread, e.g. stopped) and then for imagod's answer.
 *
 * The control path of a secondary: each open, close and attach is a request to imagod,
 * tried again (answered once: a retry never opens or closes twice) until imagod answers, for
 * up to 5 s. imagod answers within a second or two however loaded (its waits for its engine
 * are bounded by the time the application still waits), and starts no open the application
 * no longer waits for. Without an answer after 5 s: -ENOTCONN when imagod is gone or (attach)
 * answers nothing, -ETIMEDOUT when it still runs but did not answer in time (overloaded).
 *
 * Messages may be empty: a length of 0 (and a NULL pointer with it) is sent, and delivered,
 * as a message of 0 bytes.
 *
 * imagod's death: a secondary process checks, at most every 10 ms and only while nothing moves
 * on an endpoint (rx ring empty, tx ring full, no free buffer, imago_wait(),
 * imago_peer_ready()), whether imagod still exists; once it is gone those calls return
 * -ENOTCONN instead of waiting for ever, and imago_open()/imago_close() do not wait for it.
 * Until then a send the tx ring has room for returns 0, and the message is lost with what
 * imagod held (docs/USER.md, "If imagod itself dies").
 * Attaching again needs a new process.
 *
 * Handles: imago_t and imago_ep_t are opaque handles, not pointers to memory, and every
 * function checks them. A handle that was closed or detached, closed twice, or never
 * returned by imago_open()/imago_attach_*() is refused with -EINVAL (0 or NULL from the
 * functions that return a count, an id or a name), never a crash; it stays refused even
 * after its resources are reused by a later imago_open().
 *
 * Groups (reliable multicast): imago_group_open() gives an endpoint for a group instead of a
 * peer. Its messages go out once to the group's multicast address and reach every member
 * node, each in order, exactly once; events (members joining, leaving, expired; streams
 * starting and ending) arrive on the same rx ring, in their place among the messages. See
 * imago_group_open() and docs/USER.md ("Groups").
 *
 * Buffer ownership: a buffer given to imago_send_zc() that returned 0, and a descriptor given
 * to imago_release(), stop being the application's at once. Sending or freeing such a buffer
 * again is -EINVAL, and releasing a descriptor again frees nothing (it is counted): a message
 * imago accepted is delivered whatever the application does with stale pointers afterwards.
 */
#ifndef IMAGO_H
#define IMAGO_H

#include <stddef.h>
#include <stdint.h>

#include "imago_msg.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An attachment to imago (one per process). */
typedef struct imago_attachment imago_t;
/** An open endpoint. */
typedef struct imago_ep imago_ep_t;

/** Longest endpoint name, without its terminating NUL. */
#define IMAGO_NAME_MAX 31

/** Most peers (--peer) one node takes: a 33rd is a bad option (-EINVAL; imagod exits 2). */
#define IMAGO_PEERS_MAX 32

/** Most buffers one endpoint may hold from imago_buf_alloc() at once, neither sent nor freed
 *  (-ENOSPC beyond): of its 8192 loans, the rest stay for its sends by copy. */
#define IMAGO_BUF_HELD_MAX 7168

/** Send flags. They act on the sending engine and are not carried to the receiver: a
 *  received descriptor's flags are 0 (IMAGO_MSG_F_EVENT on a group event). */
#define IMAGO_FASTPATH IMAGO_MSG_F_FASTPATH /**< send at once instead of coalescing */
#define IMAGO_ACK_REQ IMAGO_MSG_F_ACK_REQ   /**< ask the receiver to acknowledge at once */

/**
 * Start imago inside this process: EAL, the ports, the nodes and their engine lcores.
 *
 * @param argc, argv  an imagod command line: `prog [EAL args --] [node options]` (see
 *                    `imagod --help`). With argc <= 1 (or argv NULL): the embedded default,
 *                    two nodes (ids 1 and 2) joined by a crossed net_ring pair, no
 *                    hugepages, engines on one worker lcore. The calling thread becomes
 *                    EAL's main lcore and is the application's.
 * @param out         the attachment, on success.
 * @return 0; -EINVAL bad options (printed to stderr), imagod's own --duration,
 *         --stats-period and --file-prefix among them (an embedded node ends with its
 *         application, prints no counters and runs EAL on a prefix of its own); -EALREADY this
 *         process is attached;
 *         -ENOTSUP this process attached before: DPDK's EAL starts once per process, so
 *         after imago_detach(), or after an attach that failed once EAL had started, attach
 *         again in a new process; -ENODEV a port could not be opened; -ENOMEM no memory for
 *         pools or rings; -EIO EAL failed to start.
 */
int imago_attach_embedded(int argc, char **argv, imago_t **out);

/**
 * Attach to a running imagod as a DPDK secondary process (needs hugepages, as imagod has).
 *
 * @param file_prefix  imagod's --file-prefix (NULL: "imago").
 * @param out          the attachment, on success.
 * @return 0; -EALREADY this process is attached; -ENOTSUP this process attached before
 *         (see imago_attach_embedded()); -EIO no imagod with that prefix runs (found before
 *         EAL starts: the process may try again, e.g. once imagod is up), or EAL failed to
 *         start as a secondary (imagod runs with --no-huge, no hugepages); -ENOTCONN imagod
 *         did not answer within 5 s (a DPDK primary that is not imagod, one stopped, or one
 *         overloaded: attach again in a new process); -EPROTO imagod speaks another version.
 *         One case never returns: an earlier application of that imagod killed inside its
 *         own attach can hold EAL's shared memory lock for good, and EAL's start waits on it
 *         (docs/USER.md, "When an application dies": restart imagod; bound the wait with a
 *         timer of your own, e.g. alarm(), to notice).
 */
int imago_attach_secondary(const char *file_prefix, imago_t **out);

/**
 * Close every endpoint still open and detach (embedded: stop the engines, the ports and
 * EAL, once this process's nodes left the groups they received, each source having answered
 * its LEAVE, or after 250 ms at most: a source that did not hear it expires the member
 * instead, group_expire_ns later; and once each group they closed as a source (imago_close()
 * of a SEND endpoint) ended at every member, and each live peer acknowledged what its
 * engine had taken to send to it (the endpoints' closes among it: the peer's endpoint learns
 * it closed), or after 1 s at most: a member or peer still waiting then learns it when it
 * declares this node dead; a node of a fabric, its engines stopped, then closes its
 * circuits, each far end told `closed`, and tells its neighbours it leaves, so they route
 * round it at once: docs/PROTOCOL.md 3.10.5; secondary: stop EAL, unless imagod died: then EAL's
 * shared state is left as it is, since its cleanup could wait for ever on a lock imagod
 * held when it died, and the process's exit releases it). @p im and every endpoint handle
 * of it are invalid afterwards. A process that returns from main() or calls exit() while
 * attached is detached so at its exit (an atexit handler, registered by the first attach);
 * imagod then logs nothing, as for any detach. Secondaries that detach at the same instant
 * may see EAL print "Cannot destroy local memory map" / "Could not release memory subsystem
 * data" (DPDK 22.11's own cleanup of this process's view of the shared memory; seen in 1 to
 * 4 of 40 concurrent detaches): the detach returns 0, imagod and its pools are unaffected.
 * @return 0; -EINVAL @p im is not a live attachment (NULL, detached already, forged).
 */
int imago_detach(imago_t *im);

/** @return how many nodes this attachment serves (embedded default: 2; a secondary: as many
 *  as imagod runs, 2 with --pair), or 0 for a handle that is not live. */
unsigned imago_node_count(const imago_t *im);
/** @return the id of node @p index (0-based), or 0 for an index out of range. */
uint64_t imago_node_id(const imago_t *im, unsigned index);

/**
 * Run-to-completion: poll every node of @p im once from the calling thread (receive frames,
 * deliver to endpoints' rx rings, take their tx rings, run timers, send). Only for an
 * embedded attachment started with `--run-to-completion`: it has no engine lcore, so nothing
 * moves unless the application calls this, often (from the thread that sends and receives;
 * imago_wait() and imago_close() poll by themselves while they wait). For machines with few
 * cores: the application and its engines share one. Several threads may call it (and wait
 * in imago_wait() on their own endpoints): one at a time polls, and a call that finds
 * another thread polling returns -EBUSY at once, having done nothing (that thread moves the
 * nodes).
 * @return the work done, a count with no fixed unit (frames received and sent, messages
 *         and buffers moved; 0: nothing to do); -EINVAL @p im not live; -ENOTSUP the nodes
 *         have their engine lcore (the default, and every secondary); -EBUSY another thread
 *         of this process is polling them just now. A node polled rarely loses
 *         nothing as long as its gaps stay shorter than its peers' --dead-after-ms (3 s by
 *         default), but its peers resend what it did not acknowledge in time: a stream slows
 *         far more than the gaps alone would say. A longer gap is a death to a peer, as for
 *         any silent node: the peer declares this node dead and drops what it had sent and
 *         this node had not confirmed (its msgs_unconfirmed; here the endpoints see the
 *         peer go and come back, peer_resets), and the stream goes on past them
 *         (docs/USER.md, "When a peer node dies or restarts"). Buffers the application
 *         freed (imago_buf_free()) go back to their pool as the nodes are polled, some each
 *         poll: after thousands of frees, imago_buf_alloc() may return -EAGAIN until this was
 *         called about as many times; poll and try again.
 */
int imago_engine_poll(imago_t *im);

/** A node's engine counters, summed over its peers: a snapshot its engine lcore publishes
 *  about every millisecond, counted since the node started. imagod's counter lines and
 *  telemetry's /imago/node,ID use the engine's names for some: frames_sent is pkts_sent,
 *  frames_received pkts_received, acks_sent ack_only_sent, losses_detected pkts_lost,
 *  peer_resets resets, peer_deaths deaths, msgs_unconfirmed discarded_msgs; frames_rejected
 *  is the sum of their reject_* and link_decode_* rejections; msgs_in_flight is the sum of
 *  /imago/peers' tx_unconfirmed_msgs; the others as here (circ_* below). */
struct imago_node_stats {
	uint64_t node;               /**< the node's id */
	uint64_t msgs_sent;          /**< messages the engine accepted from endpoints (and its control channel) */
	uint64_t msgs_received;      /**< messages the engine delivered */
	uint64_t msgs_retransmitted; /**< retransmissions (of a message or a fragment of one) */
	uint64_t frames_sent;        /**< frames of sessions with peers handed to the port, ACKs and
	                                  repairs included (group data and parity frames are not:
	                                  group_data_frames, group_repair_frames; group control
	                                  frames are) */
	uint64_t frames_received;    /**< frames of sessions that passed every check (group data
	                                  and parity frames not included; group control frames are) */
	uint64_t frames_rejected;    /**< frames refused (malformed, bad CRC or tag, foreign, stale,
	                                  a peer's HELLOs stating another frame size: its --mtu is
	                                  not this node's, no session, reject_settings_mismatch, logged),
	                                  and group frames of a stream this node does not receive
	                                  (not joined, or left: a source goes on sending to the group
	                                  address for its other members: telemetry's
	                                  /imago/node,ID reject_not_joined tells them apart), and
	                                  frames for other nodes a bridge or switch floods to this
	                                  promiscuous port (to an address it has not learnt, e.g.
	                                  HELLOs to a configured peer that is not running:
	                                  reject_wrong_dst grows by a few a second with no attack) */
	uint64_t acks_sent;          /**< frames that carried only an acknowledgement */
	uint64_t nacks_sent;         /**< negative acknowledgements (gap reports) sent */
	uint64_t losses_detected;    /**< frames found lost (timeouts and gap reports) */
	uint64_t rto_expired;        /**< retransmission timeouts */
	uint64_t peer_resets;        /**< restarts of a peer node */
	uint64_t peer_deaths;        /**< peers declared dead */
	uint64_t msgs_unconfirmed;   /**< messages dropped unconfirmed at those resets and deaths */
	uint64_t msgs_in_flight;     /**< now: messages the engine took and its peers have not yet
	                                  confirmed (a sender that detaches before this is 0 may
	                                  lose them, should a frame be lost on the way) */
	/* Groups (imago_group_open), this node's streams and those it receives: */
	uint64_t group_msgs_sent;     /**< messages sent to groups */
	uint64_t group_data_frames;   /**< group frames first sent (once per frame when the link multicasts) */
	uint64_t group_unicast_copies;/**< copies of first sends to each member where the link cannot */
	uint64_t group_repair_frames; /**< frames resent to a member that asked (NACK), and parity frames */
	uint64_t group_expiries;      /**< members this node's streams expired (of an
	                                   IMAGO_GROUP_NACK stream: only one whose node died, or that
	                                   neither left nor asked for --group-expire-ms after a close) */
	uint64_t group_msgs_received; /**< group messages the engine delivered to this node's
	                                   endpoints; those an endpoint closed (or left) before
	                                   taking them are counted again in msgs_no_endpoint or
	                                   msgs_closed_unreceived */
	uint64_t group_nacks_sent;    /**< gap reports sent to sources */
	uint64_t frames_not_allowed;  /**< frames dropped before the engine by the peer allow-list: from an
	                                   address and a node that are no peer, or in the name of a peer
	                                   from another address (not in frames_rejected) */
	/* Two networks (imagod --redundancy MODE; all 0 for a node on one network). Index 0 is
	 * network A, 1 network B. */
	uint32_t net_mode;               /**< IMAGO_NET_ONE, IMAGO_NET_ACTIVE_STANDBY, IMAGO_NET_DUPLICATE, IMAGO_NET_PING_PONG */
	uint32_t net_state[2];           /**< now, the worst toward any peer: IMAGO_NET_UP, IMAGO_NET_SUSPECT, IMAGO_NET_DOWN */
	uint64_t net_frames_sent[2];     /**< frames (not heartbeats) each network's link took */
	uint64_t net_frames_received[2]; /**< valid frames received on each (second copies not counted) */
	uint64_t net_heartbeats_lost[2]; /**< heartbeats that did not arrive: each network's loss */
	uint64_t net_resent[2];          /**< frames last sent on it that were found lost */
	uint64_t net_failovers[2];       /**< times it went down toward a peer while the other was up
	                                      (in every mode; not the FAILOVER events) */
	uint64_t net_failbacks;          /**< active-standby: times traffic came back to network A */
	uint64_t net_duplicates_dropped; /**< second copies of frames dropped, both networks */
	/* NACK-based group streams (IMAGO_GROUP_NACK): */
	uint64_t group_nack_freed;    /**< frames this node's NACK streams freed unacknowledged
	                                   (older than --group-nack-hold-ms, or no room) */
	uint64_t group_units_lost;    /**< units of NACK streams this node receives that their
	                                   sources had freed: the sum of the counts of the
	                                   IMAGO_GROUP_LOST events given (what a stream ended DROPPED
	                                   or GONE lacked is told by its ENDED position, not here) */
	/* A node of a multi-hop fabric (imagod --topology; all 0 otherwise), docs/PROTOCOL.md 3.10.
	 * imagod's and telemetry's names: circ_up is circ_circuits_up, circ_down circ_circuits_down,
	 * circ_forwarded circ_data_forwarded, circ_rejected the sum of circ_bad_frame,
	 * circ_unknown_vci, circ_bad_setup, circ_wrong_peer and circ_setups_unproven; the others
	 * as here. */
	uint64_t circ_in_use;         /**< now: circuits this node is an end or a hop of */
	uint64_t circ_ports_up;       /**< now: its links that are alive (HELLOs answered) */
	uint64_t circ_up;             /**< circuits of its ends that came up (opened or accepted) */
	uint64_t circ_down;           /**< circuits of its ends that went down (or never came up) */
	uint64_t circ_links_down;     /**< times one of its links went silent, or another node than the
	                                   topology's answered on it */
	uint64_t circ_forwarded;      /**< frames of other nodes' circuits it forwarded */
	uint64_t circ_pushbacks;      /**< times it stopped reading a link: a frame's next link was full */
	uint64_t circ_rejected;       /**< circuit frames dropped: unknown or forged VCIs, bad frames and
	                                   set-ups, frames in another node's name */
	/* Parity repair of group streams (--group-parity), docs/PROTOCOL.md 3.7.7: */
	uint64_t group_parity_sent;    /**< parity frames this node's group streams sent (counted in
	                                    group_repair_frames too) */
	uint64_t group_parity_rebuilt; /**< frames of streams this node receives that it rebuilt from a
	                                    parity frame instead of asking for them */
	/* The copy-free send (docs/PROTOCOL.md 3.4.1): */
	uint64_t msgs_by_ref;          /**< of msgs_sent, messages sent out of the application's pool
	                                    buffer itself, with no copy (see imago_send_zc()) */
	uint64_t msgs_no_endpoint;     /**< messages received for an endpoint not open on this node
	                                    (never opened, closed, or its process died), dropped
	                                    (imagod's line: no_endpoint); group messages for a group
	                                    left meanwhile too */
	uint64_t group_flight_cuts;    /**< times a member of this node's group streams asked for
	                                    --group-burst frames or more lost in a row (its queue
	                                    overflowed) and its source cut the frames it keeps in
	                                    flight (docs/PROTOCOL.md 3.7.8; 0 unless --group-burst) */
	/* What closing endpoints dropped (imago_close(), or the close of a process that died;
	 * imagod's line: closed_unsent, closed_unreceived): */
	uint64_t msgs_closed_unsent;     /**< messages still in their tx rings, never sent */
	uint64_t msgs_closed_unreceived; /**< messages delivered into their rx rings and never
	                                      received (their senders had them confirmed) */
};

/** imago_node_stats.net_mode: how a node uses its networks. */
#define IMAGO_NET_ONE            0 /**< one network */
#define IMAGO_NET_ACTIVE_STANDBY 1 /**< traffic on A; B when A fails */
#define IMAGO_NET_DUPLICATE      2 /**< every frame on both, the first copy kept */
#define IMAGO_NET_PING_PONG      3 /**< frames alternate between A and B */
/** imago_node_stats.net_state. */
#define IMAGO_NET_UP      0 /**< in use */
#define IMAGO_NET_SUSPECT 1 /**< in use; failures lately, or a heartbeat late */
#define IMAGO_NET_DOWN    2 /**< not used: silent, the peer hears nothing on it, or too many failures */

/**
 * Fill @p st with the counters of node @p index (0-based, as imago_node_id()) of @p im.
 * @return 0; -EINVAL @p im not live, @p index out of range, or NULL @p st; -EAGAIN the
 *         engine lcore was publishing throughout (rare: try again).
 */
int imago_node_stats_get(const imago_t *im, unsigned index, struct imago_node_stats *st);

/** Endpoint options. Zero fields take the default. */
struct imago_ep_opts {
	uint64_t local_node; /**< which node of this attachment (0: the first) */
	uint32_t ring_size;  /**< slots per ring, a power of two, 64..4096 [1024] (a descriptor
	                          takes one; a message of 49 to IMAGO_SEND_INLINE_MAX bytes inline
	                          in the ring 2 to 4) */
	union {
		uint32_t flags;    /**< IMAGO_EP_NET_EVENTS, or 0 */
		uint32_t reserved; /**< the name this field had before it took flags (0 as before) */
	};
};

/** imago_ep_opts.flags: deliver, on this endpoint's rx ring, the events of the node's
 *  networks toward the endpoint's peer (a node on two networks, imagod --redundancy):
 *  descriptors with IMAGO_MSG_F_EVENT holding a struct imago_net_event, in their place among
 *  the messages. Without it such an endpoint gets messages only. */
#define IMAGO_EP_NET_EVENTS 0x1u

/** Kinds of network events (struct imago_net_event.kind); apart from the group events'. */
enum imago_net_event_kind {
	IMAGO_NET_EV_STATE = 16,    /**< network net changed state toward peer: state is IMAGO_NET_UP,
	                                 IMAGO_NET_SUSPECT or IMAGO_NET_DOWN */
	IMAGO_NET_EV_FAILOVER = 17, /**< active-standby: traffic to peer moved to network net */
	IMAGO_NET_EV_FAILBACK = 18, /**< active-standby: traffic to peer came back to network net (A) */
};

/** A network event (IMAGO_EP_NET_EVENTS): inline, len sizeof(struct imago_net_event), src the
 *  peer. The node's statistics (imago_node_stats.net_*) count what happened meanwhile. */
struct imago_net_event {
	uint32_t kind;     /**< enum imago_net_event_kind */
	uint32_t net;      /**< 0: network A, 1: network B */
	uint32_t state;    /**< IMAGO_NET_EV_STATE: the new state; else the network's state now */
	uint32_t reserved;
	uint64_t peer;     /**< the peer node the change is toward */
};

/**
 * Open endpoint @p name towards node @p peer.
 *
 * @param opts  NULL for the defaults.
 * @return 0; -EINVAL @p im not live, bad name (empty, longer than IMAGO_NAME_MAX), bad
 *         ring size, unknown local node, @p peer is not a peer of that node (node ids are
 *         1 .. 2^32 - 1, as on the wire: a larger one is never a peer); -EEXIST this name and peer are
 *         open already on that node; -ENOSPC no free endpoint slot; -ENOMEM no memory for
 *         the rings; -ENOTCONN (secondary) imagod is gone; -ETIMEDOUT (secondary) imagod
 *         did not answer within 5 s (see "the control path" above); if it opened the
 *         endpoint after all, the name stays taken (-EEXIST) until this process exits.
 */
int imago_open(imago_t *im, const char *name, uint64_t peer, const struct imago_ep_opts *opts,
	       imago_ep_t **out);

/**
 * Close @p ep: the peer sees it closed, unsent messages in its tx ring are dropped, received
 * descriptors not yet released are reclaimed (their pointers become invalid), and so are
 * messages delivered into its rx ring and not yet received: the peer's engine had them
 * confirmed, so its sender is not told (drain with imago_recv_burst() until it returns 0
 * before closing to keep them; the close races with what still arrives meanwhile, which the
 * node drops and counts as no_endpoint). The node counts the messages so dropped:
 * imago_node_stats.msgs_closed_unsent and msgs_closed_unreceived. A data-path call another thread is inside on @p ep
 * (see "Threads" above) ends first: the close waits for it (they do not block), and every
 * call on @p ep from then on is refused (-EBUSY while the close runs, -EINVAL after).
 * @p ep is invalid afterwards, whatever is returned but -EBUSY.
 * @return 0; -EINVAL @p ep is not a live endpoint (NULL, closed already); -ETIMEDOUT the
 * engine did not confirm within a second, or (secondary) imagod did not answer within 5 s:
 * the endpoint is closed all the same, later (at the latest when this process exits);
 * -EBUSY another thread stayed inside a call on @p ep for a second (nothing closed).
 */
int imago_close(imago_ep_t *ep);

/** One message to send by copy. */
struct imago_iov {
	const void *data;
	uint32_t len;
};

/**
 * Send one message by copy: up to IMAGO_MSG_INLINE_MAX bytes inside the descriptor, up to
 * IMAGO_SEND_INLINE_MAX in the descriptor and the tx ring slots after it (one more slot per
 * 64 bytes), larger ones in a pooled buffer.
 * @param flags  IMAGO_FASTPATH, IMAGO_ACK_REQ, or 0.
 * @return 0; -EAGAIN the tx ring is full, or no pooled buffer is free (retry later; senders
 *         never take the last eighth of a pool: it is left to deliveries; and deliveries
 *         leave senders a quarter of the big pool, so an answer sent before reading the
 *         next request always finds a buffer in time);
 *         -EMSGSIZE @p len above imago_max_message(); -EINVAL @p ep not live, NULL pointer
 *         with a nonzero length, or unknown flags; -ENOTCONN the engine closed the endpoint,
 *         or (secondary) imagod is gone: see "imagod's death" above; on an ordered group
 *         endpoint also -EAGAIN while the ordering holds this node back, and -ECONNRESET
 *         once this node was left out of the order (see imago_group_open()); -EBUSY another thread is inside a call on @p ep (see "Threads" above).
 */
int imago_send(imago_ep_t *ep, const void *data, uint32_t len, uint32_t flags);

/**
 * Send up to @p n messages by copy, in order, with the same @p flags.
 * @return how many were taken, or a negative errno as imago_send() when the first one
 *         could not be taken for a reason other than back-pressure (0 is returned for
 *         back-pressure). Fewer than @p n: the next message met back-pressure, or is itself
 *         refused (a NULL pointer, too long): a call starting with it says which (0 for
 *         back-pressure, else its errno).
 */
int imago_send_burst(imago_ep_t *ep, const struct imago_iov *msgs, unsigned n, uint32_t flags);

/**
 * Zero-copy send, step 1: a buffer of at least @p len bytes to write the message into.
 * @return 0 and *buf; -EAGAIN no buffer free now (senders never take the last eighth of a
 *         pool; counted in tx_ring_full); -EMSGSIZE @p len above imago_max_message();
 *         -ENOSPC too many buffers held by this endpoint: IMAGO_BUF_HELD_MAX from this call
 *         neither sent nor freed yet, or all its 8192 loans (sent ones until the engine took
 *         them included; the pools' eighth usually comes first); -EINVAL @p ep not live, NULL @p buf;
 *         -ENOTCONN (secondary) imagod is gone; -ENOTSUP an ordered group endpoint (its
 *         messages are sent by copy, behind their ordering header); -EBUSY another thread is inside a call on @p ep (see "Threads" above).
 */
int imago_buf_alloc(imago_ep_t *ep, uint32_t len, void **buf);

/**
 * Zero-copy send, step 2: send the first @p len bytes of @p buf (from imago_buf_alloc() on
 * this endpoint). On success the buffer belongs to imago at once (a second send or a free of
 * it is -EINVAL, and the message is delivered); on -EAGAIN it is still yours. Do not write
 * to it after a successful send: the message may go out of the buffer itself (below), as
 * first sent or as repaired, and on any link it is read when the engine takes it from the
 * tx ring, some time after this call, so what a late write does to what is delivered is
 * not defined (a late write is often seen at the receiver). On a unicast
 * endpoint whose node's link is net_memif or net_af_packet (without --auth-key), a message
 * larger than half a frame's payload goes out of this buffer itself, with no copy, on its
 * first sending and on every repair, and the buffer returns to the pool only once the peer
 * acknowledged the whole message (imago_node_stats.msgs_by_ref counts them; at most half of
 * a pool's buffers are held so, the rest are copied into frames as on other links): while
 * many are in flight, imago_buf_alloc() and imago_send() find the pool empty (-EAGAIN)
 * sooner. A message imago_send() put in a pooled buffer goes the same way.
 * @return 0; -EAGAIN tx ring full; -EINVAL @p ep not live, @p buf is not a buffer of this
 *         endpoint that the application holds (foreign, freed, or sent already: counted in
 *         buffer_invalid), @p len larger than the buffer (its pool's buffer size, which may
 *         exceed what imago_buf_alloc() was asked for: only that length is the caller's to
 *         write), or unknown flags (neither counted); -EMSGSIZE @p len above
 *         imago_max_message() (which may have fallen since imago_buf_alloc(): the peer's node
 *         takes less; the buffer stays the caller's); -ENOTCONN the endpoint
 *         was closed, or (secondary) imagod is gone; -ENOTSUP an ordered group endpoint;
 *         -EBUSY another thread is inside a call on @p ep (see "Threads" above).
 */
int imago_send_zc(imago_ep_t *ep, void *buf, uint32_t len, uint32_t flags);

/** Give back a buffer from imago_buf_alloc() that was not sent.
 *  @return 0; -EINVAL @p ep not live, or @p buf not a buffer the application holds
 *  (foreign, freed already, or sent: then it is imago's; counted in buffer_invalid);
 *  -EBUSY another thread is inside a call on @p ep (see "Threads" above). */
int imago_buf_free(imago_ep_t *ep, void *buf);

/**
 * Receive up to @p n message descriptors. Each stays valid (imago_msg_data(), len, src,
 * flags) until given back with imago_release(). Non-blocking. On any endpoint but an ordered
 * group's, a message of 49 to IMAGO_SEND_INLINE_MAX bytes comes inline in the rx ring and is
 * copied here into the endpoint's receive area (IMAGO_TIER_COPY), which holds twice ring_size
 * messages: while the application holds all of them this returns what it can (0 if need
 * be) and counts rx_copy_full; the rest waits, in order, until some are released.
 * @p n may be any count (@p msgs must hold @p n): the call returns what is ready.
 * @return how many were received (0: none ready, or @p n 0); -EINVAL @p ep not live, NULL
 *         @p msgs with @p n > 0;
 *         -ENOTCONN the endpoint was closed under the application, or (secondary) imagod
 *         is gone; -ECONNRESET an ordered group endpoint whose node was left out of the
 *         order (imago_group_open()). On an ordered group endpoint, messages that arrived
 *         wait here until their order lets them out, and the call also sends the ordering's
 *         records; -EBUSY another thread is inside a call on @p ep (see "Threads" above) (nothing taken).
 */
int imago_recv_burst(imago_ep_t *ep, struct imago_msg *msgs, unsigned n);

/**
 * Give back @p n received descriptors in bulk (their buffers are freed or reused). Each
 * descriptor given back is marked released (its tier becomes IMAGO_TIER_INLINE), so
 * releasing the same array twice frees nothing the second time, and is not refused: an
 * IMAGO_TIER_INLINE descriptor holds nothing to give back, whatever its bytes, and is never
 * refused nor counted. A descriptor of another tier that is stale (a copy kept from before a
 * release), forged (its loan, owner or data pointer not as received; for IMAGO_TIER_MBUF,
 * and on an ordered group's endpoint, the data must lie inside the owner's buffer), or
 * received on another endpoint frees
 * nothing and is left unchanged (one received on another endpoint stays readable and is
 * still to be released there): every loan carries a generation, so such a descriptor can
 * never free a buffer the application still holds through another descriptor. An exact
 * copy of a held descriptor is that hold: whichever is released first gives it back.
 * @return how many descriptors were refused (0 when all were valid; also counted in the
 *         statistics' release_invalid); -EINVAL @p ep not live, or NULL @p msgs with n > 0;
 *         -EBUSY another thread is inside a call on @p ep (see "Threads" above) (nothing released).
 */
int imago_release(imago_ep_t *ep, struct imago_msg *msgs, unsigned n);

/** @return how many messages are ready to receive now (non-blocking), or -EINVAL (@p ep
 *  not live). On an ordered group endpoint: those its order lets out now, and those still
 *  on the ring, which may yet wait for their order or be the ordering's own records. */
int imago_poll(imago_ep_t *ep);

/**
 * Wait until a message is ready, at most @p timeout_us microseconds (negative: no limit).
 * The calling thread polls briefly, then sleeps in short naps: this is for control threads
 * and slow consumers; hot loops call imago_recv_burst() directly. In run-to-completion the
 * calling thread polls the engines meanwhile (imago_engine_poll()), as imago_close() does. On an ordered group
 * endpoint "ready" counts as imago_poll() does: imago_recv_burst() may then return 0.
 * @return 1 a message is ready; 0 timed out; -EINVAL @p ep not live; -ENOTCONN closed, or
 *         (secondary) imagod is gone.
 */
int imago_wait(imago_ep_t *ep, int64_t timeout_us);

/** @return 1 when the peer's endpoint is open (sends flow), 0 when not, -EINVAL (@p ep
 *  not live), -ENOTCONN ((secondary) imagod is gone). */
int imago_peer_ready(imago_ep_t *ep);

/** @return the largest message imago_send() accepts on @p ep, in bytes: the node's
 *  --max-message, and once the peer's endpoint is ready no more than the peer's node takes (its
 *  --max-message may be smaller: a larger message put on the tx ring before is discarded, in
 *  tx_invalid); on a group SEND endpoint no more than every peer of the node takes, member or
 *  not, as their HELLOs say (it may fall while the endpoint is open, the same way) (0: @p ep not live;
 *  on a group endpoint that sends also at most half the node's --group-window units, about
 *  3 MB with 4096 units and a 1500-byte MTU; a RECV-only one, which sends nothing, answers
 *  the peer endpoints' largest). */
uint32_t imago_max_message(const imago_ep_t *ep);

/** Per-endpoint statistics, counted since the endpoint opened. */
struct imago_ep_stats {
	uint64_t msgs_sent;       /**< messages the engine took from the tx ring (on an ordered
	                               group endpoint the ordering's record messages too: see
	                               order_records) */
	uint64_t bytes_sent;
	uint64_t msgs_received;   /**< messages the engine put on the rx ring */
	uint64_t bytes_received;
	uint64_t tx_inline;       /**< sent inline in the tx ring: in the descriptor (up to
	                               IMAGO_MSG_INLINE_MAX bytes) or, by copy, in the ring slots
	                               after it (up to IMAGO_SEND_INLINE_MAX) */
	uint64_t tx_pool;         /**< sent in a pooled buffer (copied by imago_send) */
	uint64_t tx_zero_copy;    /**< sent with imago_send_zc */
	uint64_t rx_inline;       /**< received inline in the rx ring: in the descriptor, or (up to
	                               IMAGO_SEND_INLINE_MAX bytes; not on an ordered group endpoint)
	                               in the slots after it, copied out by imago_recv_burst() */
	uint64_t rx_pool;         /**< received in a pooled buffer */
	uint64_t rx_mbuf;         /**< received zero-copy in the frame's mbuf */
	uint64_t tx_ring_full;    /**< sends and imago_buf_alloc() calls refused with -EAGAIN (back-pressure) */
	uint64_t rx_ring_full;    /**< times the engine held a delivery back: rx ring or loans
	                               full (counted at each of its tries: how long, not how many) */
	uint64_t rx_no_buffer;    /**< times the engine held a delivery back: no pooled buffer
	                               free (or, for messages of the big pool, this node's
	                               deliveries hold their share of it); counted at each try */
	uint64_t tx_invalid;      /**< malformed descriptors found on the tx ring and discarded, and
	                               messages larger than the peer's node takes (put on the ring
	                               before its endpoint was ready: imago_max_message()) */
	uint32_t tx_ring_used;    /**< ring slots in use in the tx ring now (a message of 49 to
	                               IMAGO_SEND_INLINE_MAX bytes sent by copy takes 2 to 5) */
	uint32_t rx_ring_used;    /**< ring slots in use in the rx ring now (the same) */
	uint32_t peer_ready;      /**< 1 when the peer's endpoint is open */
	uint32_t reserved;
	uint64_t release_invalid; /**< descriptors imago_release() refused (stale, forged, foreign) */
	uint64_t buffer_invalid;  /**< buffers imago_send_zc()/imago_buf_free() called on this
	                               endpoint refused (NULL, foreign, another endpoint's, freed
	                               or sent already) */
	/* The peer node restarted (a new incarnation proved itself) or died (silent longer than
	 * the node's --dead-after-ms). Either way the engine drops the messages that peer had
	 * not confirmed: they are never delivered to a later incarnation. They are always the
	 * last ones the engine took from this endpoint before the event. Messages still in the
	 * tx ring are not dropped: they go to the peer's next incarnation once its endpoint opens. */
	uint64_t peer_resets;      /**< restarts of the peer node seen while open */
	uint64_t peer_deaths;      /**< times the peer node was declared dead while open (a peer
	                                never heard yet counts too: silent for dead_after since
	                                this node started, it is declared dead and asked on) */
	uint64_t msgs_unconfirmed; /**< messages dropped unconfirmed at those events, in total */
	uint64_t last_unconfirmed_first; /**< the latest event that dropped messages of this
	                                      endpoint: the first one dropped, counted as msgs_sent
	                                      counts (1 = the first message the engine took from
	                                      this endpoint); 0 if none was ever dropped */
	uint64_t last_unconfirmed_count; /**< ...and how many (they run to last_unconfirmed_first
	                                      + count - 1) */
	uint64_t rx_rebuilt;      /**< of rx_pool: messages of more than one frame reassembled
	                               in the buffer they were delivered in (no copy after
	                               reassembly; the others were copied from the engine's) */
	uint64_t events;          /**< group events put on the rx ring (group endpoints) */
	uint64_t events_lost;     /**< group events dropped: the rx ring was full (a SEND-only
	                               endpoint whose application never receives, say; ENDED
	                               and LOST wait for room instead, and are never dropped) */
	/* A SEND group endpoint's stream (0 on other endpoints): published when it takes
	 * messages and about every millisecond. */
	uint32_t group_members;   /**< members in the source's view */
	uint32_t group_view;      /**< the view number (steps at each join, leave, expiry) */
	uint64_t group_pending;   /**< stream units (a message takes one per frame it fills) taken
	                               from the tx ring that not every member has acknowledged yet:
	                               0 once every member has everything sent (close then loses
	                               nothing) */
	/* Ordered groups (IMAGO_GROUP_CAUSAL, IMAGO_GROUP_TOTAL; 0 on other endpoints): */
	uint64_t order_held;      /**< now: messages received and held back for their order */
	uint64_t order_bad;       /**< messages dropped: ordering header malformed, of another
	                               mode or member set, or out of its source's order */
	uint64_t order_records;   /**< messages of ordering records this endpoint sent (credits;
	                               in total order ACKs and epoch changes;
	                               records waiting together go as one message): msgs_sent
	                               counts them too */
	uint64_t order_departed;  /**< members that left the order (ended, expired, left, or
	                               said gone by another member) */
	uint64_t order_pending;   /**< now: this node's messages not yet known delivered at every
	                               member still in the order (causal: as their stamps and
	                               credits say; total: as their ACKs say). Wait for 0 (receiving
	                               meanwhile) before closing, as for group_pending */
	uint64_t order_dropped;   /**< total order: messages of departed members dropped at a new
	                               epoch, past what it kept of them (delivered nowhere) */
	uint64_t rx_copy_full;    /**< imago_recv_burst() calls cut short because the application
	                               held its whole receive area (IMAGO_TIER_COPY messages not
	                               released: at most twice ring_size): release some */
	uint64_t calls_busy;      /**< calls refused with -EBUSY: another thread was inside a call
	                               on this endpoint (one thread at a time: see "Threads") */
};

/** Fill @p st with @p ep's statistics. @return 0 or -EINVAL (@p ep not live, NULL @p st). */
int imago_stats(const imago_ep_t *ep, struct imago_ep_stats *st);

/* ---- Groups ---------------------------------------------------------------------------- */

/** What a group endpoint does (struct imago_group_opts.flags; 0: SEND | RECV). */
#define IMAGO_GROUP_SEND 0x1u        /**< this node sends to the group: it becomes a source of it */
#define IMAGO_GROUP_RECV 0x2u        /**< this node joins the group: it receives every source's stream */
#define IMAGO_GROUP_FROM_OLDEST 0x4u /**< with RECV: start each source's stream at the oldest
                                          message it still holds, not at its next one */
#define IMAGO_GROUP_NACK 0x8u        /**< with SEND: a NACK-based stream (fixed-rate telemetry, say):
                                          members report gaps only, never acknowledge; this node
                                          keeps what it sent --group-nack-hold-ms [100], and at most
                                          --group-window units, then frees it, ACKed or not, so no
                                          member ever holds it back; a member that asks for what
                                          was freed gets IMAGO_GROUP_LOST in its place. Peer
                                          endpoints (imago_open()) are ACK-based: a NACK stream
                                          to one peer is a group only that peer joins */

#define IMAGO_GROUP_CAUSAL 0x10u     /**< causal order across the group's sources (with SEND | RECV
                                          and the members named in imago_group_opts): no message
                                          is delivered before one that its sender had delivered or
                                          sent before it. See imago_group_open(), "Ordered groups".
                                          Flags of an order alone are -EINVAL: add SEND | RECV */
#define IMAGO_GROUP_TOTAL 0x20u      /**< total order (with SEND | RECV and the members named):
                                          every member delivers the group's messages in one and
                                          the same order, by their senders' clocks (two one-way
                                          trips). See imago_group_open(), "Ordered groups" */

/** Most members an ordered group (IMAGO_GROUP_CAUSAL, IMAGO_GROUP_TOTAL) may name. */
#define IMAGO_GROUP_ORDER_MAX_MEMBERS 64

/** Group endpoint options. Zero fields take the default. */
struct imago_group_opts {
	uint64_t local_node; /**< which node of this attachment (0: the first) */
	uint32_t ring_size;  /**< slots per ring, a power of two, 64..4096 [1024] (a descriptor
	                          takes one; a message of 49 to IMAGO_SEND_INLINE_MAX bytes inline
	                          in the ring 2 to 4) */
	uint32_t flags;      /**< IMAGO_GROUP_* [IMAGO_GROUP_SEND | IMAGO_GROUP_RECV] */
	/* Ordered groups only (IMAGO_GROUP_CAUSAL or IMAGO_GROUP_TOTAL; NULL and 0 otherwise).
	 * Every member opens the group with the same order flag, the same members and the same
	 * window. */
	const uint64_t *members; /**< every member's node id, this node's among them */
	uint32_t n_members;      /**< how many: 2 .. IMAGO_GROUP_ORDER_MAX_MEMBERS */
	uint32_t order_window;   /**< messages of one member that may be sent and not yet
	                              delivered everywhere, 1 .. 4096 [256]: the ordering's
	                              flow control;
	                              a member sends at most this many per round trip */
};

/** Kinds of group events (struct imago_group_event.kind). */
enum imago_group_event_kind {
	IMAGO_GROUP_JOINED = 1,  /**< member joined the source's view; position: its first message's */
	IMAGO_GROUP_LEFT = 2,    /**< member left the view; position: how far it had acknowledged */
	IMAGO_GROUP_EXPIRED = 3, /**< member was expired (it held the source back longer than the
	                              node's --group-expire-ms, or its node died); position as LEFT.
	                              Views are per source: with several sources, one member's
	                              expiry comes once in each source's stream this node
	                              receives (and once from this node's own, if it sends) */
	IMAGO_GROUP_STARTED = 4, /**< this node receives source's stream from position on */
	IMAGO_GROUP_ENDED = 5,   /**< this node no longer receives source's stream; reason says why,
	                              position is the first unit not delivered (it comes after
	                              every message the node held in order, and is never dropped) */
	IMAGO_GROUP_LOST = 6,    /**< a NACK stream (IMAGO_GROUP_NACK): units [position, position +
	                              count) of source's stream were freed by the source before this
	                              node got them; every message with a unit there is not delivered,
	                              and the stream goes on after them */
};

/** Why a stream ended here (struct imago_group_event.reason, for IMAGO_GROUP_ENDED). */
enum imago_group_end_reason {
	IMAGO_GROUP_END_LEAVE = 1,   /**< this endpoint closed (the node left the group) */
	IMAGO_GROUP_END_DROPPED = 2, /**< the source expired this node (this node held back its
	                                  stream too long, or was off its core so long that the
	                                  source's node declared it dead): its messages from position
	                                  on are lost to this node (never skipped silently; when the
	                                  source sent nothing more, nothing is lost). It comes
	                                  after every message held here before it, so possibly long
	                                  after the expiry. This node gets nothing more from that
	                                  source until this endpoint is closed and the group opened
	                                  again (a new stream, as for a late joiner) */
	IMAGO_GROUP_END_CLOSED = 3,  /**< the source closed its group endpoint (or its process died
	                                  and its node closed the endpoint for it: told apart from a
	                                  close by nothing on the wire): everything it sent was
	                                  delivered (a NACK stream: or reported IMAGO_GROUP_LOST) */
	IMAGO_GROUP_END_GONE = 4,    /**< the source's node died or restarted: what it had not
	                                  delivered here is lost */
};

/**
 * A group event: the bytes of a received descriptor whose flags have IMAGO_MSG_F_EVENT (tier
 * inline, len sizeof(struct imago_group_event), src the stream's source). Events of this
 * node's own stream (JOINED, LEFT, EXPIRED with source this node) arrive on a SEND endpoint;
 * those of the streams it receives (the same three, as each source's view changes, in their
 * place among its messages, then STARTED and ENDED) on a RECV endpoint. Positions count the
 * source's stream units (a message of more than one frame takes several: docs/PROTOCOL.md 3.7).
 */
struct imago_group_event {
	uint32_t kind;     /**< enum imago_group_event_kind */
	uint32_t view;     /**< the source's view number after the change (JOINED, LEFT, EXPIRED) */
	uint64_t source;   /**< the stream's source node */
	uint64_t member;   /**< whose membership changed (this node for STARTED and ENDED) */
	uint32_t position; /**< a unit of the source's stream (see the kinds) */
	uint32_t reason;   /**< enum imago_group_end_reason for ENDED, else 0 */
	uint32_t count;    /**< LOST: how many units from position on; else 0 */
	uint32_t reserved; /**< 0 */
};

/**
 * Open an endpoint on group @p group (1 .. 2^32 - 1): a send side (IMAGO_GROUP_SEND), a
 * receive side (IMAGO_GROUP_RECV), or both. Groups need no set-up: every peer of the node
 * may join any group, and a node receives the streams of every peer that sends to it.
 *
 * SEND: imago_send(), imago_send_burst(), imago_buf_alloc() and imago_send_zc() send to every
 * member of the group; each message is framed once and sent once to the group's multicast
 * address (docs/PROTOCOL.md 3.7); a member that lost a frame is repaired by unicast. Members
 * are the peers that joined (with a RECV endpoint) when or after it opened; a message goes to
 * the members of the view it was sent in, so a member that joins later never gets what was
 * sent before (but for what its source still holds, with IMAGO_GROUP_FROM_OLDEST): a source
 * that must reach a known set of members waits until imago_ep_stats.group_members counts them
 * before its first send (an ordered group, opened with its member list, refuses sends with
 * -EAGAIN until all of them joined). The slowest member paces the sender (-EAGAIN, as on a
 * peer endpoint); a member that holds the stream back longer than --group-expire-ms is
 * expired (IMAGO_GROUP_EXPIRED) and the others go on. imago_peer_ready() is 1. With
 * IMAGO_GROUP_NACK nothing paces the sender but the link and --group-window (-EAGAIN only
 * while frames wait for the link): what a member could not get repaired in time reaches it as
 * IMAGO_GROUP_LOST, never silently skipped.
 * RECV: this node asks every peer to admit it to its stream of @p group, now and whenever a
 * peer comes up or opens the group; imago_recv_burst() gives each source's messages in that
 * source's order (descriptor src: the source), exactly once, and the events above. Sends on a
 * RECV-only endpoint (imago_send*(), imago_buf_alloc()) are -EINVAL; imago_peer_ready() is 0 on it.
 * imago_close() ends both: a source's members get everything it sent, then ENDED (reason
 * CLOSED) and leave; a member leaves every stream (ENDED, reason LEAVE).
 *
 * Ordered groups (IMAGO_GROUP_CAUSAL or IMAGO_GROUP_TOTAL; docs/USER.md, docs/PROTOCOL.md
 * 3.11.3): the members are fixed at open (imago_group_opts.members, this node among them) and
 * each opens the group alike, SEND | RECV (a plain endpoint of the same group id is no
 * member: it receives the members' messages with their ordering header in front, and the
 * ordering's records as messages of their own). imago_recv_burst() gives the other members'
 * messages in causal order, or in the one total order, each source's own order kept. A
 * member's own messages are not delivered back to it (in total order they take their place
 * in the sequence the others deliver). Each message carries an ordering header in front of
 * its bytes (imago_max_message() is smaller by it), which imago_recv_burst() removes.
 * The ordering runs in the calling thread: the records it sends (credits; in total order every
 * member's ACKs: what it holds, its clock) go out from imago_send*(), imago_recv_burst() and
 * imago_wait(), so every member must keep receiving, or the others' sends wait (-EAGAIN),
 * never their data. The others' deliveries wait for these records, so they go at once (as
 * IMAGO_FASTPATH) from a receive call that found fewer messages than it could take (light
 * load), from imago_wait() and from a send with IMAGO_FASTPATH; under load (a receive
 * call that filled its burst of 32) and from a send without it they are coalesced with
 * what follows (waiting at most 20 us, docs/PROTOCOL.md's coalesce_ns).
 * Sends are -EAGAIN until every other member has joined this node's stream
 * (IMAGO_GROUP_JOINED) or left the order, and while order_window of this node's messages are
 * not yet delivered at every member (as their credits or ACKs say). A member whose node this
 * node had a session with and then declared dead (--dead-after-ms) before its stream started
 * here leaves the order then, and this endpoint gets IMAGO_GROUP_ENDED (reason GONE) for it
 * as if its stream had ended; a member whose node was never heard from is waited for. In
 * total order a member that leaves the order on any word (below) while its stream had not
 * started here gets that ENDED (GONE) then too, once: no end of its stream ever comes.
 * imago_buf_alloc() and imago_send_zc() are -ENOTSUP on an ordered endpoint. Events are
 * delivered as they arrive, not held back with the messages. A member leaves the order when
 * its stream ends here (ENDED, any reason but DROPPED), or this node's stream expires it or
 * it leaves it (EXPIRED, LEFT), and the others are told so by this node (and by each member
 * told, once, so a member left out hears it from any whose stream it has): causal order stops
 * waiting for its messages that never came (once its stream ended here); total order starts
 * a new epoch (the lowest member left cuts that member's messages where every member left has
 * them all, so what any member delivered, every member delivers; its messages beyond the cut
 * are dropped everywhere, order_dropped; a member left alone sends on, its messages
 * delivered as it sends them). A member told it was left out, or whose
 * stream from some source ended with DROPPED (that source expired it, so it cannot have
 * every message), gets -ECONNRESET from imago_recv_burst() and its sends from then on. The
 * ordering's records are messages of this node's stream: imago_ep_stats.msgs_sent and
 * group_pending count them too (order_records says how many). Before closing, wait (and
 * receive) until order_pending is 0, then group_pending, or a member that left may take its
 * last messages with it. Messages whose ordering header is malformed, of another mode or
 * member set, or out of their source's order are dropped and counted (order_bad).
 * Big messages (above 2048 bytes with their ordering header) are held in the receiving
 * node's share of the big pool (its 64 buffers less two reserves of 8, shared by the nodes of
 * the process: 24 each with two, 48 for an imagod of one node). So that the messages held
 * back for their order always fit, a member keeps at most share / (members - 1) of its big
 * messages not yet delivered at every member (causal), or share / (2 x (members - 1)) not
 * yet stable (total), whatever order_window allows (at least 1): beyond that a big send is
 * -EAGAIN, small ones go on. The share is this node's: give every member's node the same
 * big pool (the default) and nodes per process, and release big deliveries promptly (a
 * delivery held by the application, or by another endpoint of the node, takes from it).
 * Sessions (docs/USER.md, "Ordered groups", says more):
 * - An ordered session is one opening by every member: a member that closes has left it,
 *   and opening it again while others stay open cannot take it up (what came before never
 *   reaches it): the members that stayed tell it so, and its imago_recv_burst() and sends
 *   return -ECONNRESET (what it sent meanwhile is dropped at the others, order_bad or
 *   order_dropped). Opening the same group id again after every member closed may meet the
 *   earlier session's leaves (a member still closing when another reopened): the member that
 *   reopened last may get -ECONNRESET the same way. Give a new session a new group id.
 *
 * @param opts  NULL for the defaults.
 * @return 0; -EINVAL @p im not live, @p group 0, unknown flags, FROM_OLDEST without RECV or
 *         NACK without SEND, an order flag without SEND | RECV, with NACK or FROM_OLDEST, or
 *         both of them, bad members (NULL, fewer than 2 or more than
 *         IMAGO_GROUP_ORDER_MAX_MEMBERS, ids repeated, 0 or above 2^32 - 1, this node not
 *         among them), order_window above 4096, members or a window without an order flag,
 *         bad ring size, unknown local node; -EEXIST a group endpoint of @p group is open on
 *         that node already; -EBUSY this node's previous stream of @p group is still ending
 *         (its members leaving: retry shortly); -ENOSPC no free endpoint slot, or the node
 *         sends to (--group-sources) or receives (--group-streams) as many groups as it may;
 *         -ENOMEM no memory for the rings; -ETIMEDOUT the engine did not answer within a
 *         second, or (secondary) imagod did not answer within 5 s (as imago_open());
 *         -ENOTCONN (secondary) imagod is gone; -ENOTSUP an order flag on a node of a
 *         multi-hop fabric (--topology: ordering is not offered over circuits yet).
 */
int imago_group_open(imago_t *im, uint32_t group, const struct imago_group_opts *opts, imago_ep_t **out);

/** @return the group of a group endpoint, 0 for a peer endpoint or a handle not live. */
uint32_t imago_ep_group(const imago_ep_t *ep);

/** @return the name of @p ep, or NULL (@p ep not live): a group endpoint's is "group-G"
 *  (telemetry's too), which a peer endpoint may be named as well; imago_ep_group() tells
 *  them apart. */
const char *imago_ep_name(const imago_ep_t *ep);
/** @return the peer node of @p ep, or 0 (@p ep not live, or a group endpoint). */
uint64_t imago_ep_peer(const imago_ep_t *ep);

#ifdef __cplusplus
}
#endif

#endif /* IMAGO_H */
