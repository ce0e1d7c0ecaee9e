/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The message descriptor: what travels through an endpoint's rings between the engine lcore
 * and the application, one cache line each.
 *
 * A message lives in one of four tiers (Pupa's three buffers and a copy): small ones inline in
 * the descriptor itself, medium ones in a buffer from a pool, large ones left in the received
 * mbuf (zero-copy); messages of 49 to IMAGO_SEND_INLINE_MAX bytes (but on an ordered group
 * endpoint) arrive inline in the rx ring's slots and are copied into the endpoint's receive
 * area in the application's own memory. The application reads imago_msg_data() whatever the
 * tier, and gives descriptors back in bulk with the endpoint's release call; the tier says
 * what release frees.
 */
#ifndef IMAGO_MSG_H
#define IMAGO_MSG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes a message may have and still travel inside its descriptor. */
#define IMAGO_MSG_INLINE_MAX 48
/** Bytes a message sent by copy may have and still travel inline in the tx ring: in its
 *  descriptor and the (up to three) ring slots right after it, with no pool buffer. */
#define IMAGO_SEND_INLINE_MAX (IMAGO_MSG_INLINE_MAX + 3 * 64)

/** Where a message's bytes are. */
enum imago_msg_tier {
	IMAGO_TIER_INLINE = 0, /**< in the descriptor (u.inline_data) */
	IMAGO_TIER_POOL = 1,   /**< in a pooled buffer (u.ext.data; u.ext.owner is the buffer) */
	IMAGO_TIER_MBUF = 2,   /**< in a received mbuf (u.ext.data; u.ext.owner is the mbuf) */
	IMAGO_TIER_COPY = 3,   /**< in the endpoint's receive area, in the application's memory
	                            (u.ext.data): imago_recv_burst() copied it there */
};

/** Message flags of a descriptor on the send side (0 in a received one: see imago.h). */
#define IMAGO_MSG_F_FASTPATH 0x1u /**< send at once, no coalescing wait */
#define IMAGO_MSG_F_ACK_REQ 0x2u  /**< ask the receiver to acknowledge at once */
/** Set by imago_send_zc() in the descriptors it queues (the tier counters tell zero-copy
 *  sends from copies by it); never by the application, never in a received descriptor. */
#define IMAGO_MSG_F_ZERO_COPY 0x100u
/** Set in a received descriptor of a group endpoint that carries a group event (its bytes,
 *  inline, are a struct imago_group_event: see imago.h) instead of a message. */
#define IMAGO_MSG_F_EVENT 0x200u

/** One message descriptor: 64 bytes, one cache line. */
struct imago_msg {
	uint64_t src;   /**< node id of the sender (receive side) or of the peer (send side) */
	uint32_t len;   /**< message bytes */
	uint16_t flags; /**< IMAGO_MSG_F_* */
	uint8_t tier;   /**< enum imago_msg_tier */
	uint8_t reserved; /**< 0 */
	union {
		uint8_t inline_data[IMAGO_MSG_INLINE_MAX];
		struct {
			void *data;    /**< the message's first byte */
			void *owner;   /**< the pool buffer or the mbuf that holds it */
			uint32_t loan; /**< imago's record of the loan (internal) */
		} ext;
	} u;
};

/** @return a pointer to the message's bytes, whatever its tier. */
static inline void *imago_msg_data(struct imago_msg *m)
{
	return m->tier == IMAGO_TIER_INLINE ? (void *)m->u.inline_data : m->u.ext.data;
}

#ifdef __cplusplus
}
static_assert(sizeof(imago_msg) == 64, "one descriptor, one cache line");
static_assert(offsetof(imago_msg, u) == 16, "payload area starts at 16");
#endif

#endif /* IMAGO_MSG_H */
