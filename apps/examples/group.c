/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * imago-group: reliable multicast with imago_group_open(). A publisher sends --count
 * numbered, checksummed messages to a group once --members members joined; each subscriber
 * checks that every message of every source arrives once, in order and intact, and prints
 * the group's events as they come (members joining, leaving, expired; its streams starting
 * and ending). `both` runs a publisher on node 1 and a subscriber on node 2 in this process
 * (embedded); `pub` and `sub` attach to an imagod (--secondary) or embed a node of their own
 * (`-- imagod options`), one process per node. `all` is many-to-many (NASA KSC's streams):
 * every node publishes at --rate and receives every other, and reports per source the
 * end-to-end delay (p50, p99) and throughput. `all --order causal|total` opens an ordered
 * group (IMAGO_GROUP_CAUSAL, IMAGO_GROUP_TOTAL) of the --members named: each message carries
 * its source, its number and what its source had delivered of each member when it sent it,
 * so every delivery's order is checked outside the library; --order-log writes the delivery
 * order, to compare members' total orders.
 */
#include "example.h"

#include <sys/resource.h>

static const char *const roles[] = {"pub", "sub", "both", "all", NULL};
static const char help[] =
	"Usage: %s pub|sub|both|all [options] [-- imagod options of an embedded node]\n"
	"  (an option's value follows it, or is joined to it by '=': --timeout 5, --timeout=5)\n"
	"  all: send to the group and receive it on one endpoint (every node of a many-to-many\n"
	"       group runs it: --members is the other nodes, each a source too; --size >= 24,\n"
	"       but with --order causal|total any: it grows)\n"
	"  --secondary PREFIX  attach to the imagod started with --file-prefix PREFIX [embedded]\n"
	"  --node ID           pub, sub, all: this process's node, 1..4294967295 [the attachment's\n"
	"                      first; sub: its second of two] (both runs the first two: refused)\n"
	"  --group G           the group, 1..4294967295 [7]\n"
	"  --count N           messages to send (pub) or to expect from each source (sub),\n"
	"                      1..18446744073709551615 (--order causal|total: ..4294967294) [100000]\n"
	"  --size B | A-B      message bytes, 16..4294967295, or spread over A..B [64]\n"
	"  --members N         pub, all: send once N members joined (all: and expect N sources),\n"
	"                      1..64 [1]\n"
	"  --members ID,ID,..  all: every member's node id, this node's among them, 2..64 distinct:\n"
	"                      N is the others; the order of the list indexes the vector each\n"
	"                      message carries\n"
	"  --rate R            pub, all: at most R messages per second, 0..1000000000 [0: as fast as\n"
	"                      the group takes]\n"
	"  --fastpath          pub, all: send with IMAGO_FASTPATH (each burst at once, not waiting\n"
	"                      to coalesce with the next messages)\n"
	"  --from-oldest       sub, all: start at the oldest message a source still holds\n"
	"  --wait-end          sub: a source is done only once its stream ended here (EVENT\n"
	"                      ended; RESULT sources' ended says why), not at its last message\n"
	"                      (not both: its publisher, in the same process, ends the stream\n"
	"                      only after its subscriber is done)\n"
	"  --nack              pub, all: a NACK-based stream (IMAGO_GROUP_NACK): the publisher never\n"
	"                      waits for a member; what a member misses for good it is told (EVENT\n"
	"                      lost, RESULT lost_reported: stream units, not messages). A subscriber\n"
	"                      fails on any gap no such event reported (lost_silently), whatever\n"
	"                      the stream's kind; complete: the source's last message came, which\n"
	"                      says how many it sent (sent; --count unless it was stopped)\n"
	"  --idle-us US        sleep US microseconds whenever a pass moved nothing (a core shared by\n"
	"                      many nodes; with --run-to-completion the node waits too), 0..4294967295\n"
	"                      [0: spin]\n"
	"  --order fifo|causal|total  all: each source's own order only (fifo), or an ordered group\n"
	"                      (IMAGO_GROUP_CAUSAL, IMAGO_GROUP_TOTAL) of the --members ID,ID,.. named;\n"
	"                      every member gives the same --order, --members and --order-window;\n"
	"                      not with --nack or --from-oldest. Sending starts once every member\n"
	"                      joined or left the order. Each message then carries its source, its\n"
	"                      number (1, 2, ..) and how many messages its source had delivered of each\n"
	"                      member when it sent it: at least 44 + 4 x members bytes (a smaller\n"
	"                      --size grows to that). Each delivery is checked: its source's next one,\n"
	"                      and nothing its source had delivered (of this node: sent) before sending\n"
	"                      it missing here; RESULT order_violations counts those that are not (any\n"
	"                      fails the run). Not missing: what a member whose stream ended here\n"
	"                      'gone' or 'dropped' never delivered here (lost, and the order no longer\n"
	"                      waits for it): RESULT order_deps_ended counts deliveries that depended\n"
	"                      on such. A member the group left out stops with an error [fifo]\n"
	"  --order-window N    all, ordered: how many of a member's messages may be sent and not yet\n"
	"                      delivered everywhere, 1..4096 [256]\n"
	"  --order-log FILE    sub, all: write each delivered message as a line 'SRC SEQ' (SEQ 1, 2,\n"
	"                      ..; the last, 'no more', is --count + 1), in delivery order, at the end.\n"
	"                      A member's own messages are not delivered to it, so not in its log.\n"
	"                      FILE is opened (created or emptied) at the start: one that cannot be is\n"
	"                      refused (exit 2); a write that fails at the end is said (exit 1)\n"
	"  --timeout S         give up after S seconds without progress, 0..1000000 [0: never]\n"
	"SIGINT/SIGTERM: a (fifo) pub that started sends its last message next, saying how many it\n"
	"sent, and waits up to 2 s for every member to hold them all (a second signal: at once).\n"
	"Prints READY once its group endpoint is open (its node's handshakes with its peers may still\n"
	"be under way), EVENT lines, and one RESULT {json} line (all:\n"
	"a pub and a sub one; the sub one has order, order_violations, order_deps_ended, the endpoint's\n"
	"order_held, order_bad, order_records, order_departed and order_dropped at the end, and\n"
	"order_held_max, the most order_held seen while it ran, the first order_bad said on stderr;\n"
	"each source's ended is why its latest stream ended: after a restart, the new stream's).\n"
	"Exit code 1 when a check failed.\n"
	"What a stream that ended 'gone' or 'dropped' (its source died, or expired this node) lacks is\n"
	"lost, as its EVENT ended said: RESULT lost and lost_ended count it, lost_silently does not;\n"
	"so is what a member the ordered group left out lacks of every source (the error said so),\n"
	"and, ordered, what a member lacks of a member that left the order (expired, left, ended).\n"
	"Stopped by a signal or by --timeout, what had not come yet of streams that had not ended is\n"
	"RESULT unfinished (counted in lost, not in lost_silently), as is what a source whose stream\n"
	"ended 'closed' before its last message never sent (it stopped: killed, imagod closed it).\n"
	"An option of roles other than this one (pub, sub, all above; both plays pub and sub) is refused,\n"
	"as is one not listed here (imago-pubsub's --peer, --name, --hold, ...). all's delay_us\n"
	"percentiles come from a histogram of fixed size (within 1.6 %%; max exact), whatever --count.\n";
/* Options of some roles only: refused for the others (ex_parse()). */
static const char *const only[] = {"--node", "pub, sub, all", "--members", "pub, both, all", "--rate", "pub, both, all", "--nack", "pub, both, all",
				   "--fastpath", "pub, both, all", "--from-oldest", "sub, both, all", "--wait-end", "sub", "--order-log",
				   "sub, both, all", "--order", "all", "--order-window", "all", NULL};

enum { kMaxSources = EX_MAX_MEMBERS, kMaxMembers = EX_MAX_MEMBERS }; /* ex_parse() holds --members N to it */
static const double kStopDrainS = 2.0; /* a stopped publisher waits this long for its members */

/* An ordered group (--order causal|total): what a member knows to check the order itself. */
struct order {
	uint32_t flag;                /* IMAGO_GROUP_CAUSAL or IMAGO_GROUP_TOTAL (0: fifo) */
	uint32_t n, self;             /* members, and this node's index among them */
	uint64_t ids[kMaxMembers];    /* --members, in its order: it indexes the vectors */
	uint64_t count[kMaxMembers];  /* messages delivered of each member; at self: sent */
	uint64_t last[kMaxMembers];   /* the number of the last one delivered of each */
	uint8_t ended[kMaxMembers];   /* its stream ended here gone or dropped: no more will come */
	uint64_t violations;
	uint64_t deps_ended;          /* deliveries that had a dependency skipped: on a member whose
	                                 stream ended here (gone, dropped) before it was delivered */
};

struct pub {
	imago_ep_t *ep;
	struct order *ord; /* NULL: fifo */
	uint32_t slot;     /* bytes of scratch per message */
	uint64_t next, bytes, t0, t1;
	uint64_t last; /* messages before the last one ("no more"): --count, or fewer once stopped */
	struct imago_ep_stats end_st; /* the endpoint's last statistics, once closed early */
	int closed;                   /* both --nack: closed once done, so the member is told ENDED */
	uint32_t joined, left, expired;
	uint64_t expired_ids[kMaxMembers];
	int done;
	char *scratch;
};

struct source {
	uint64_t id, first, next, delivered, bytes, lost, dup, bad, t0, t1;
	uint64_t lost_reported, silent; /* NACK stream: units reported lost; gaps without a report */
	int lost_since;                 /* a LOST event since the last message */
	int started, ended, reason, got_end;
	int departed;       /* ordered: it left the order here (its messages past its cut dropped) */
	uint64_t said_sent; /* what its last message said it sent before it */
	struct ex_hist *delay; /* role all: send to delivery, ns (one clock: one host); else NULL */
};

struct sub {
	imago_ep_t *ep;
	struct order *ord;     /* NULL: fifo */
	uint64_t (*log)[2];    /* --order-log: (source, number) of each delivery, in order */
	size_t n_log, cap_log, log_dropped; /* dropped: no memory (the log fails) */
	uint64_t held_max;     /* ordered: the most order_held seen (sampled each pass) */
	struct source src[kMaxSources];
	unsigned n_src;
	uint64_t t0, t1, own;
	struct ex_hist *delays; /* role all: one per source (fixed memory, whatever --count); else NULL */
	FILE *log_file;         /* --order-log, opened at the start */
	unsigned want_sources; /* role all: done once this many sources sent their last message */
	int done;
	int left_out; /* an ordered group left this node out (-ECONNRESET): it receives no more */
	int bad_said; /* the first order_bad was said on stderr */
};

enum { kStampAt = EX_HDR, kStampMin = EX_HDR + 8 }; /* role all: send time after the header */
/* Ordered: after the send time, the source (8 bytes), its number (8), the members (4), then
 * per member a uint32_t: what the source had delivered of it (of itself: sent) before. */
enum { kOrderAt = kStampMin, kOrderVec = kOrderAt + 20 };

/* The bytes of message @p seq: at least what an ordered one carries; the last (EX_END) 8
 * more, at its end: how many messages its source sent before it. */
static uint32_t msg_len(const struct ex_opts *o, const struct order *ord, uint64_t seq)
{
	uint32_t len = seq == EX_END ? kStampMin : ex_size(o, seq), least = ord ? kOrderVec + 4 * ord->n : 0;
	return (len > least ? len : least) + (seq == EX_END ? 8u : 0u); /* past a send time */
}

/* The last message's count (a stopped publisher's is below --count), checksum made again. */
static void end_put(uint8_t *buf, uint32_t len, uint64_t sent)
{
	memcpy(buf + len - 8, &sent, sizeof sent);
	uint32_t sum = ex_sum(buf, len);
	memcpy(buf + offsetof(struct ex_hdr, sum), &sum, sizeof sum);
}

/* Its number in its source's stream: 1, 2, .., and --count + 1 for the last. */
static uint64_t msg_number(const struct ex_opts *o, uint64_t seq) { return seq == EX_END ? o->count + 1 : seq + 1; }

static int order_index(const struct order *ord, uint64_t id)
{
	for (uint32_t k = 0; k < ord->n; ++k)
		if (ord->ids[k] == id) return (int)k;
	return -1;
}

/* Write the ordering part of message @p seq (before stamp(), which sums it too). */
static void order_put(const struct order *ord, const struct ex_opts *o, uint8_t *buf, uint64_t seq)
{
	uint64_t num = msg_number(o, seq);
	memcpy(buf + kOrderAt, &ord->ids[ord->self], 8);
	memcpy(buf + kOrderAt + 8, &num, 8);
	memcpy(buf + kOrderAt + 16, &ord->n, 4);
	for (uint32_t k = 0; k < ord->n; ++k) {
		uint32_t d = (uint32_t)(k == ord->self ? num - 1 : ord->count[k]);
		memcpy(buf + kOrderVec + 4 * k, &d, 4);
	}
}

/* One delivery of source @p src (an intact message): it must be its source's next, and
 * whatever its source had delivered before sending it (of a third member, or of ours what we
 * sent) must have been delivered here already. Anything else is a violation, but for what a
 * member whose stream ended here gone or dropped never delivered here: its ENDED event said
 * that is lost, and the order no longer waits for it (counted in deps_ended). */
static void order_check(struct order *ord, uint64_t src, const uint8_t *data, uint32_t len)
{
	uint64_t id = 0, num = 0;
	uint32_t n = 0;
	if (len >= kOrderVec) {
		memcpy(&id, data + kOrderAt, 8);
		memcpy(&num, data + kOrderAt + 8, 8);
		memcpy(&n, data + kOrderAt + 16, 4);
	}
	int s = order_index(ord, id);
	if (s < 0 || s == (int)ord->self || id != src || n != ord->n || len < kOrderVec + 4 * n) {
		ord->violations++;
		return;
	}
	int bad = num != ord->last[s] + 1, skipped = 0;
	for (uint32_t k = 0; k < n; ++k) {
		uint32_t d;
		memcpy(&d, data + kOrderVec + 4 * k, 4);
		int missing = k != (uint32_t)s && d > ord->count[k];
		skipped |= missing && ord->ended[k];
		bad |= missing && !ord->ended[k];
	}
	ord->violations += bad != 0;
	ord->deps_ended += skipped && !bad;
	ord->last[s] = num, ord->count[s]++;
}

static const char *kind_name(uint32_t k)
{
	static const char *const names[] = {"?", "joined", "left", "expired", "started", "ended", "lost"};
	return k < 7 ? names[k] : "?";
}

static const char *reason_name(uint32_t r)
{
	static const char *const names[] = {"", "leave", "dropped", "closed", "gone"};
	return r < 5 ? names[r] : "?";
}

static void print_event(const char *role, const struct imago_group_event *e)
{
	printf("EVENT %s %s source %llu member %llu view %u position %u%s%s", role, kind_name(e->kind),
	       (unsigned long long)e->source, (unsigned long long)e->member, e->view, e->position,
	       e->reason ? " reason " : "", reason_name(e->reason));
	if (e->kind == IMAGO_GROUP_LOST) printf(" count %u", e->count);
	printf("\n");
	fflush(stdout);
}

/* An event of the publisher's own stream: who joined, left, was expired. */
static void pub_event(struct pub *p, const struct imago_group_event *e)
{
	print_event("pub", e);
	p->joined += e->kind == IMAGO_GROUP_JOINED, p->left += e->kind == IMAGO_GROUP_LEFT;
	if (e->kind == IMAGO_GROUP_EXPIRED && p->expired < kMaxMembers) p->expired_ids[p->expired++] = e->member;
}

/* Write the send time @p now after the header (the checksum covers it). */
static void stamp(uint8_t *buf, uint32_t len, uint64_t now)
{
	memcpy(buf + kStampAt, &now, sizeof now);
	uint32_t sum = ex_sum(buf, len);
	memcpy(buf + offsetof(struct ex_hdr, sum), &sum, sizeof sum);
}

/* Send what the tx ring takes now, up to a burst; the last message is "no more". */
static int pub_step(struct pub *p, const struct ex_opts *o)
{
	struct imago_iov iov[32];
	unsigned n = 0, room = 32;
	const uint64_t now = ex_now_ns(); /* one clock read a burst */
	if (o->rate > 0) { /* paced: what is due by now */
		uint64_t due = (uint64_t)((double)(now - p->t0) * o->rate / 1e9) + 1;
		room = due > p->next ? (unsigned)(due - p->next < 32 ? due - p->next : 32) : 0;
	}
	for (uint64_t s = p->next; n < room && s <= p->last; ++s, ++n) {
		uint64_t seq = s == p->last ? EX_END : s;
		uint32_t len = msg_len(o, p->ord, seq);
		uint8_t *buf = (uint8_t *)p->scratch + (size_t)n * p->slot;
		ex_fill(buf, seq, len);
		if (seq == EX_END) end_put(buf, len, p->last);
		if (p->ord) order_put(p->ord, o, buf, seq);
		if (len >= kStampMin) stamp(buf, len, now);
		iov[n] = (struct imago_iov){buf, len};
	}
	int k = imago_send_burst(p->ep, iov, n, o->fastpath ? IMAGO_FASTPATH : 0);
	if (k == -EAGAIN) k = 0; /* an ordered group not yet joined by every member, or its window */
	for (int i = 0; i < k; ++i) p->bytes += p->next + (uint64_t)i < p->last ? iov[i].len : 0;
	p->next += k > 0 ? (uint64_t)k : 0;
	if (p->ord && k > 0) p->ord->count[p->ord->self] += (uint64_t)k;
	if (!p->done && p->next > p->last) p->done = 1;
	return k;
}

static struct source *source_of(struct sub *s, uint64_t id)
{
	for (unsigned i = 0; i < s->n_src; ++i)
		if (s->src[i].id == id) return &s->src[i];
	if (s->n_src == kMaxSources) return NULL;
	struct source *x = &s->src[s->n_src++];
	*x = (struct source){.id = id};
	x->delay = s->delays ? &s->delays[s->n_src - 1] : NULL;
	return x;
}

/* A stream that ended with what its source had not delivered here lost (and said so). */
static int ended_lossy(const struct source *x)
{
	return x->ended && (x->reason == IMAGO_GROUP_END_GONE || x->reason == IMAGO_GROUP_END_DROPPED);
}

static void sub_event(struct sub *s, const struct imago_group_event *e)
{
	print_event("sub", e);
	struct source *x = source_of(s, e->source);
	if (x == NULL) return;
	if (e->kind == IMAGO_GROUP_STARTED) x->started++;
	if (e->kind == IMAGO_GROUP_ENDED) x->ended = 1, x->reason = (int)e->reason, x->departed = s->ord != NULL;
	int k = s->ord != NULL ? order_index(s->ord, e->source) : -1;
	if (k >= 0 && ended_lossy(x)) s->ord->ended[k] = 1;
	if (e->kind == IMAGO_GROUP_LOST) x->lost_reported += e->count, x->lost_since = 1;
}

/* Check one message of source @p x, received at @p now (the burst's clock: one read a
 * burst, not a message): the first one sets where its stream started here.
 * @return its number (msg_number()), 0 when it is corrupted. */
static uint64_t sub_message(struct source *x, const struct ex_opts *o, const struct order *ord, const uint8_t *data,
			    uint32_t len, uint64_t now)
{
	uint64_t seq, sent;
	if (x->t0 == 0) x->t0 = now;
	x->t1 = now;
	if (ex_check(data, len, &seq) < 0 || (seq != EX_END && seq >= o->count) || len != msg_len(o, ord, seq)) {
		x->bad++;
		return 0;
	}
	if (seq == EX_END) { /* says how many came before it: --count, or fewer (stopped) */
		uint64_t before;
		memcpy(&before, (const uint8_t *)data + len - 8, sizeof before);
		if (before > o->count) return x->bad++, 0;
		x->got_end = 1, x->said_sent = before;
		if (x->next != before && !x->lost_since) x->silent++;
		x->lost += before > x->next ? before - x->next : 0;
		x->next = before;
		return msg_number(o, seq);
	}
	if (x->delay && len >= kStampMin) {
		memcpy(&sent, data + kStampAt, sizeof sent);
		ex_hist_add(x->delay, now - sent);
	}
	if (x->delivered == 0 && x->next == 0) x->first = x->next = seq; /* joined late: starts here */
	if (seq < x->next) {
		x->dup++;
		return msg_number(o, seq);
	}
	x->lost += seq - x->next; /* a gap: never expected from imago, but after a LOST event */
	if (seq != x->next && !x->lost_since) x->silent++;
	x->lost_since = 0;
	x->next = seq + 1;
	x->delivered++, x->bytes += len;
	return msg_number(o, seq);
}

/* --order-log: keep (source, number) of a delivery; written at the end. */
static void log_delivery(struct sub *s, uint64_t src, uint64_t num)
{
	if (s->n_log == s->cap_log) {
		size_t cap = s->cap_log ? 2 * s->cap_log : 4096;
		void *grown = realloc(s->log, cap * sizeof *s->log);
		if (grown == NULL) {
			s->log_dropped++;
			return;
		}
		s->log = grown, s->cap_log = cap;
	}
	s->log[s->n_log][0] = src, s->log[s->n_log][1] = num;
	s->n_log++;
}

/* Write the log into @p f (opened at the start, so a path that cannot be opened was refused
 * then) and close it. @return 0, or -1 (said: no memory for every delivery, a write failed). */
static int write_log(const struct sub *s, FILE *f, const char *path, const char *prog)
{
	int rc = 0, err = 0;
	for (size_t i = 0; !s->log_dropped && rc >= 0 && i < s->n_log; ++i)
		rc = fprintf(f, "%llu %llu\n", (unsigned long long)s->log[i][0], (unsigned long long)s->log[i][1]);
	if (rc >= 0) rc = fflush(f);
	err = rc < 0 ? errno : 0;
	if (fclose(f) != 0 && err == 0) err = errno;
	if (s->log_dropped)
		return fprintf(stderr, "%s: --order-log '%s': no memory to keep every delivery (%zu kept, %zu not): "
			       "nothing written\n", prog, path, s->n_log, s->log_dropped), -1;
	if (err) return fprintf(stderr, "%s: --order-log '%s': cannot write it: %s\n", prog, path, strerror(err)), -1;
	return 0;
}

/* Read one burst of @p ep: the events of our own stream go to @p p, the rest to @p s. */
static int read_ring(imago_ep_t *ep, struct pub *p, struct sub *s, const struct ex_opts *o)
{
	struct imago_msg m[32];
	int n = imago_recv_burst(ep, m, 32);
	uint64_t now = n > 0 ? ex_now_ns() : 0;
	for (int i = 0; i < n; ++i) {
		if (m[i].flags & IMAGO_MSG_F_EVENT) {
			struct imago_group_event e;
			memcpy(&e, imago_msg_data(&m[i]), sizeof e);
			if (p != NULL && (s == NULL || e.source == s->own)) pub_event(p, &e);
			else if (s != NULL) sub_event(s, &e);
			/* Ordered: a member our stream expired or lost left the order (the library drops
			 * its messages past the cut it takes of them). */
			/* Only a member of the order: a plain endpoint on the group id is none (USER.md),
			 * and made a source here it was reported lost whole (an outside tester). */
			struct source *gone = s != NULL && s->ord != NULL && e.source == s->own &&
					      (e.kind == IMAGO_GROUP_EXPIRED || e.kind == IMAGO_GROUP_LEFT) &&
					      order_index(s->ord, e.member) >= 0
						      ? source_of(s, e.member) : NULL;
			if (gone != NULL) gone->departed = 1;
			continue;
		}
		struct source *x = s != NULL ? source_of(s, m[i].src) : NULL;
		if (x == NULL) continue;
		if (s->t0 == 0) s->t0 = now;
		const uint8_t *data = imago_msg_data(&m[i]);
		uint64_t num = sub_message(x, o, s->ord, data, m[i].len, now);
		if (num && s->ord) order_check(s->ord, m[i].src, data, m[i].len);
		if (num && o->order_log) log_delivery(s, m[i].src, num);
		s->t1 = now;
	}
	if (n > 0) imago_release(ep, m, (unsigned)n);
	if (s == NULL) return n;
	/* Done once every source that started here sent its last message or ended (all: once
	 * the sources expected did). */
	unsigned open = 0, any = 0, ended = 0;
	for (unsigned i = 0; i < s->n_src; ++i) {
		const int end = (s->src[i].got_end && !o->wait_end) || s->src[i].ended;
		any |= s->src[i].started > 0;
		open += s->src[i].started > 0 && !end;
		ended += end;
	}
	s->done = s->want_sources ? ended >= s->want_sources && !open : any && !open;
	return n;
}

/* Role all: the per-pair figures of a source (NASA's metrics): delay p50/p99, throughput. */
static void print_delay(struct source *x)
{
	if (x->delay == NULL || x->delay->n == 0) return;
	double s = x->t1 > x->t0 ? (double)(x->t1 - x->t0) / 1e9 : 1e-9;
	printf(",\"delay_us\":{\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f},\"msgs_per_s\":%.1f",
	       (double)ex_hist_at(x->delay, 0.5) / 1e3, (double)ex_hist_at(x->delay, 0.99) / 1e3,
	       (double)x->delay->max / 1e3, (double)x->delivered / s);
}

static const char *order_name(const struct order *ord)
{
	return ord == NULL ? "fifo" : ord->flag == IMAGO_GROUP_CAUSAL ? "causal" : "total";
}

/* @p ord: open an ordered group of its members (NULL: fifo). */
static imago_ep_t *open_group(imago_t *im, const struct ex_opts *o, uint64_t node, uint32_t flags,
			      const struct order *ord, const char *prog)
{
	struct imago_group_opts go = {.local_node = node, .flags = flags};
	if (ord) go.flags |= ord->flag, go.members = ord->ids, go.n_members = ord->n, go.order_window = o->order_window;
	imago_ep_t *ep = NULL;
	int rc = imago_group_open(im, o->group, &go, &ep);
	if (rc < 0) {
		fprintf(stderr, "%s: cannot open group %u on node %llu: %s\n", prog, o->group, (unsigned long long)node,
			strerror(-rc));
		return NULL;
	}
	printf("READY group %u node %llu %s%s%s\n", o->group, (unsigned long long)node,
	       flags & IMAGO_GROUP_SEND ? "send" : "receive", ord ? " order " : "", ord ? order_name(ord) : "");
	fflush(stdout);
	return ep;
}

/* The node's group counters (0 when its statistics are not published yet). */
static struct imago_node_stats node_stats(imago_t *im, uint64_t node)
{
	struct imago_node_stats ns = {0};
	for (unsigned i = 0; i < imago_node_count(im); ++i)
		if (imago_node_id(im, i) == node)
			for (int tries = 0; tries < 100 && imago_node_stats_get(im, i, &ns) == -EAGAIN; ++tries) {
			}
	return ns;
}

static void print_pub(const struct pub *p, const struct ex_opts *o, uint64_t node, imago_t *im)
{
	struct imago_ep_stats st = p->end_st;
	if (!p->closed) imago_stats(p->ep, &st);
	struct imago_node_stats ns = node_stats(im, node);
	/* CPU of this whole process (the node's engine lcore too, unless run-to-completion),
	 * busy-polling included: per message sent. */
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu_ns = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
			(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
	uint64_t sent = p->next > p->last ? p->last : p->next;
	printf("RESULT {\"mode\":\"group\",\"role\":\"pub\",\"node\":%llu,\"group\":%u,\"msgs_sent\":%llu,"
	       "\"bytes_sent\":%llu,",
	       (unsigned long long)node, o->group, (unsigned long long)sent, (unsigned long long)p->bytes);
	ex_print_rate(sent, p->bytes, p->t0 && p->t1 ? p->t1 - p->t0 : 0);
	printf(",\"members\":%u,\"view\":%u,\"pending\":%llu,\"joined\":%u,\"left\":%u,\"expired\":%u,\"expired_ids\":[",
	       st.group_members, st.group_view, (unsigned long long)st.group_pending, p->joined, p->left, p->expired);
	for (uint32_t i = 0; i < p->expired; ++i) printf("%s%llu", i ? "," : "", (unsigned long long)p->expired_ids[i]);
	printf("],\"tx_ring_full\":%llu,\"events_lost\":%llu,\"data_frames\":%llu,\"unicast_copies\":%llu,"
	       "\"repair_frames\":%llu,\"parity_frames\":%llu,\"flight_cuts\":%llu,\"process_cpu_ns_per_msg\":%.1f}\n",
	       (unsigned long long)st.tx_ring_full, (unsigned long long)st.events_lost,
	       (unsigned long long)ns.group_data_frames, (unsigned long long)ns.group_unicast_copies,
	       (unsigned long long)ns.group_repair_frames, (unsigned long long)ns.group_parity_sent,
	       (unsigned long long)ns.group_flight_cuts, sent ? cpu_ns / (double)sent : 0.0);
}

/* The sub RESULT's order part: the application's check, and the endpoint's ordering counters. */
static void print_order(const struct sub *s)
{
	struct imago_ep_stats st = {0};
	imago_stats(s->ep, &st);
	printf(",\"order\":\"%s\",\"order_violations\":%llu,\"order_deps_ended\":%llu,\"order_held\":%llu,"
	       "\"order_held_max\":%llu,\"order_bad\":%llu,\"order_records\":%llu,\"order_departed\":%llu,"
	       "\"order_dropped\":%llu",
	       order_name(s->ord), (unsigned long long)(s->ord ? s->ord->violations : 0),
	       (unsigned long long)(s->ord ? s->ord->deps_ended : 0), (unsigned long long)st.order_held,
	       (unsigned long long)s->held_max, (unsigned long long)st.order_bad, (unsigned long long)st.order_records,
	       (unsigned long long)st.order_departed, (unsigned long long)st.order_dropped);
}

/* @p cut: the run was stopped (a signal) or gave up (--timeout) before every stream ended:
 * what had not come yet is unfinished, not lost silently. */
static int print_sub(const struct sub *s, const struct ex_opts *o, uint64_t node, imago_t *im, int cut)
{
	struct imago_node_stats ns = node_stats(im, node);
	uint64_t delivered = 0, bytes = 0, lost = 0, dup = 0, bad = 0, reported = 0, silent = 0, ended = 0;
	uint64_t unfinished = 0;
	printf("RESULT {\"mode\":\"group\",\"role\":\"sub\",\"node\":%llu,\"group\":%u,\"sources\":[", (unsigned long long)node,
	       o->group);
	for (unsigned i = 0; i < s->n_src; ++i) {
		const struct source *x = &s->src[i];
		/* A stream that ended early (its source died, or dropped us): what is missing is lost,
		 * and its ENDED event (gone, dropped) said so. */
		uint64_t missing = x->got_end ? 0 : o->count - x->next;
		printf("%s{\"source\":%llu,\"first\":%llu,\"delivered\":%llu,\"complete\":%s,\"sent\":%llu,\"ended\":\"%s\"",
		       i ? "," : "", (unsigned long long)x->id, (unsigned long long)x->first,
		       (unsigned long long)x->delivered, x->got_end ? "true" : "false",
		       (unsigned long long)(x->got_end ? x->said_sent : o->count), x->ended ? reason_name((uint32_t)x->reason) : "");
		print_delay((struct source *)x);
		printf("}");
		delivered += x->delivered, bytes += x->bytes, lost += x->lost + missing, dup += x->dup, bad += x->bad;
		reported += x->lost_reported;
		/* Left out: what it lacks the error said (every source's rest), as an ENDED would; and
		 * of a member that left the order, the order dropped the rest (order_dropped). */
		const int told = ended_lossy(x) || s->left_out || x->departed;
		/* Ended closed before the source's last message: it stopped sending (its process
		 * killed: imagod closed its endpoint), and the transport delivered all it sent. */
		const int stopped = x->ended && x->reason == IMAGO_GROUP_END_CLOSED && !x->got_end;
		ended += told ? missing : 0;
		unfinished += !told && (cut || stopped) ? missing : 0;
		silent += x->silent + (missing && !x->lost_since && !told && !cut && !stopped);
	}
	printf("],\"msgs_delivered\":%llu,\"bytes_delivered\":%llu,", (unsigned long long)delivered,
	       (unsigned long long)bytes);
	ex_print_rate(delivered, bytes, s->t1 - s->t0);
	printf(",\"lost\":%llu,\"lost_reported\":%llu,\"lost_ended\":%llu,\"lost_silently\":%llu,\"unfinished\":%llu",
	       (unsigned long long)lost, (unsigned long long)reported, (unsigned long long)ended,
	       (unsigned long long)silent, (unsigned long long)unfinished);
	printf(",\"duplicated\":%llu,\"reordered\":0,\"corrupted\":%llu,\"frames_rejected\":%llu,"
	       "\"frames_not_allowed\":%llu,\"nacks_sent\":%llu,\"parity_rebuilt\":%llu",
	       (unsigned long long)dup, (unsigned long long)bad, (unsigned long long)ns.frames_rejected, (unsigned long long)ns.frames_not_allowed,
	       (unsigned long long)ns.group_nacks_sent, (unsigned long long)ns.group_parity_rebuilt);
	print_order(s);
	printf("}\n");
	/* Every gap must have come after a LOST event (only a NACK stream has them, when its
	 * source freed what this node still lacked): a silent one is a failure. */
	return silent != 0 || dup || bad || s->n_src == 0 || (s->ord && s->ord->violations);
}

/* --members ID,ID,..: @return 0, or -1 (not 2..kMaxMembers distinct node ids, decimal,
 * 1..EX_NODE_MAX, as --node: a member named twice would be waited for as two, for ever). */
static int parse_members(const char *list, struct order *ord)
{
	char *end;
	for (const char *c = list; *c; c = *end == ',' ? end + 1 : end) {
		if (ord->n == kMaxMembers || *c < '0' || *c > '9') return -1; /* no sign, space or 0x */
		errno = 0;
		ord->ids[ord->n++] = strtoull(c, &end, 10);
		if (errno || ord->ids[ord->n - 1] == 0 || ord->ids[ord->n - 1] > EX_NODE_MAX) return -1;
		if ((*end != ',' && *end != '\0') || (*end == ',' && end[1] == '\0')) return -1; /* "1,2,": a member missing */
		if (order_index(ord, ord->ids[ord->n - 1]) != (int)ord->n - 1) return -1; /* named before */
	}
	return ord->n >= 2 ? 0 : -1;
}

/* --order, --members ID,ID,.., --order-window, --order-log. @return 0, or 2 (said why). */
static int order_opts(struct ex_opts *o, struct order *ord, int all, const char *prog)
{
	const char *m = o->order ? o->order : "fifo";
	ord->flag = !strcmp(m, "causal") ? IMAGO_GROUP_CAUSAL : !strcmp(m, "total") ? IMAGO_GROUP_TOTAL : 0;
	if (ord->flag == 0 && strcmp(m, "fifo")) return fprintf(stderr, "%s: --order is fifo, causal or total\n", prog), 2;
	if (o->members_list && parse_members(o->members_list, ord) < 0)
		return fprintf(stderr, "%s: --members ID,ID,.. takes 2 to %d distinct node ids, each a whole number from 1 "
			       "to %u, not '%s'\n", prog, kMaxMembers, EX_NODE_MAX, o->members_list), 2;
	if (o->members_list && !all) return fprintf(stderr, "%s: --members ID,ID,.. is for all only (see --help)\n", prog), 2;
	if (o->members_list) o->members = ord->n - 1;
	if (ord->flag && (!all || !o->members_list || o->count >= UINT32_MAX))
		return fprintf(stderr, "%s: --order %s needs role all, --members ID,ID,.. and --count < 2^32 - 1\n", prog,
			       m), 2;
	if (!ord->flag && o->order_window)
		return fprintf(stderr, "%s: --order-window needs --order causal or total\n", prog), 2;
	if (ord->flag && (o->nack || o->from_oldest)) /* an ordered group: every message, from the start */
		return fprintf(stderr, "%s: --order %s is not with %s (see --help)\n", prog, m,
			       o->nack ? "--nack" : "--from-oldest"), 2;
	return 0;
}

/* Find this node among --members. @return 0, or -1 (said why). */
static int order_self(struct order *ord, uint64_t own, const char *prog)
{
	int k = order_index(ord, own);
	if (k < 0) fprintf(stderr, "%s: --members does not name this node (%llu)\n", prog, (unsigned long long)own);
	ord->self = k < 0 ? 0 : (uint32_t)k;
	return k < 0 ? -1 : 0;
}

/* A signal: stop at once, but for a (fifo) publisher that started: it sends its last message
 * next, saying how many came before, and goes on until every member holds them all, for
 * kStopDrainS at most or until a second signal. @return 1: stop now. */
static int stopped(struct pub *p, int do_pub, uint64_t *stop_by)
{
	if (!ex_stop) return 0;
	if (!do_pub || p->ord || p->t0 == 0 || ex_stop > 1) return 1;
	uint64_t now = ex_now_ns();
	if (*stop_by == 0) {
		*stop_by = now + (uint64_t)(kStopDrainS * 1e9);
		if (!p->done && p->next < p->last) p->last = p->next;
	}
	return now > *stop_by;
}

/* Send and receive until done: @return 0, or a negative errno (a timeout, a failed send or
 * receive: -ECONNRESET when an ordered group left this node out). */
static int run(struct pub *p, struct sub *s, const struct ex_opts *o, int do_pub, int do_sub)
{
	int all = p->ep != NULL && p->ep == s->ep, finished = 0, rc = 0;
	uint64_t last = ex_now_ns(), seen = 0, stop_by = 0;
	while (!stopped(p, do_pub, &stop_by) && rc >= 0 && !finished) {
		struct imago_ep_stats st = p->end_st;
		int work = ex_poll(); /* embedded with --run-to-completion, this thread drives the node */
		if (do_pub && !p->closed) {
			if (!all) work += read_ring(p->ep, p, NULL, o);
			imago_stats(p->ep, &st);
			if (st.order_held > s->held_max) s->held_max = st.order_held;
			if (st.order_bad > 0 && !s->bad_said) /* else a silent wait until --timeout */
				s->bad_said = 1, fprintf(stderr, "imago-group: messages dropped by the order (order_bad): "
							 "does every member give the same --order, --members and "
							 "--order-window?\n");
			/* Every member in our stream, or gone from the order (one that died before it joined
			 * here never will: the library's own -EAGAIN gate counts it out, so must we). */
			if (st.group_members + st.order_departed >= o->members && p->t0 == 0) p->t0 = ex_now_ns();
			if (p->t0 != 0 && !p->done) work += rc = pub_step(p, o);
		}
		if (rc >= 0 && do_sub) work += rc = read_ring(s->ep, all ? p : NULL, s, o);
		if (work == 0 && o->idle_us > 0) { /* nothing moved: leave the core to others a while */
			struct timespec nap = {o->idle_us / 1000000, (long)(o->idle_us % 1000000) * 1000};
			nanosleep(&nap, NULL);
		}
		/* The publisher is done once every member holds every message (closing loses none):
		 * in an ordered group, once they are delivered everywhere (order_pending), and then
		 * once the stream has nothing unacknowledged, its ordering records included. */
		uint64_t taken = st.msgs_sent >= st.order_records ? st.msgs_sent - st.order_records : 0;
		int pub_idle = !do_pub || (p->done && taken >= p->last + 1 && st.order_pending == 0 &&
					   st.group_pending == 0);
		if (do_pub && pub_idle && p->t1 == 0) p->t1 = ex_now_ns(); /* every member has everything */
		/* Both roles on a NACK stream: the member may have lost the last message for good (a
		 * LOST event for it); only the source's close then ends its stream (ENDED closed). */
		if (do_pub && do_sub && !all && o->nack && pub_idle && !p->closed)
			p->end_st = st, p->closed = 1, imago_close(p->ep);
		finished = pub_idle && (!do_sub || s->done);
		uint64_t now = ex_now_ns(), progress = p->next + st.msgs_sent + p->joined + s->t1;
		if (progress != seen) seen = progress, last = now;
		else if (o->timeout_s > 0 && (double)(now - last) > o->timeout_s * 1e9) rc = -ETIMEDOUT;
	}
	if (do_pub && p->t0 != 0 && p->t1 == 0) p->t1 = ex_now_ns(); /* stopped: the time it sent for */
	if (rc == -ECONNRESET && do_sub) s->left_out = 1; /* a send or a receive said so */
	return rc < 0 ? rc : 0;
}

int main(int argc, char **argv)
{
	struct ex_opts o = {.count = 100000, .size_min = 64, .size_max = 64, .group = 7, .members = 1,
			    .own = " --secondary --node --count --size --timeout --group --members --from-oldest --wait-end "
				   "--nack --rate --idle-us --fastpath --order --order-window --order-log ",
			    .only = only};
	struct order ord = {0};
	int rc = ex_parse(argc, argv, &o, roles, help);
	if (rc) return rc == 1 ? 0 : rc;
	if (o.group == 0) return fprintf(stderr, "%s: --group must be 1..4294967295\n", argv[0]), 2;
	int do_pub = strcmp(o.role, "sub") != 0, do_sub = strcmp(o.role, "pub") != 0, all = !strcmp(o.role, "all");
	if ((rc = order_opts(&o, &ord, all, argv[0])) != 0) return rc;
	if (all && !ord.flag && o.size_min < kStampMin) /* ordered, every message grows past it */
		return fprintf(stderr, "%s: all needs --size >= %u (the send time travels in each message)\n", argv[0],
			       (unsigned)kStampMin), 2;
	struct pub p = {.ord = ord.flag ? &ord : NULL, .last = o.count};
	struct sub s = {.ord = p.ord, .want_sources = all ? o.members : 0};
	/* Opened now, not only when the run ends: a path that cannot be written is a bad line. */
	if (o.order_log && (s.log_file = fopen(o.order_log, "w")) == NULL)
		return fprintf(stderr, "%s: --order-log '%s': cannot open it for writing: %s\n", argv[0], o.order_log,
			       strerror(errno)), 2;
	imago_t *im;
	const int attached = ex_attach(&o, argv[0], &im);
	if (attached < 0) {
		if (s.log_file) fclose(s.log_file);
		return ex_attach_status(&o, attached);
	}
	rc = 1;
	uint32_t least = msg_len(&o, p.ord, EX_END); /* an ordered message's least size */
	p.slot = o.size_max > least ? o.size_max : least;
	if (all && (s.delays = calloc(kMaxSources, sizeof *s.delays)) == NULL) {
		fprintf(stderr, "%s: no memory for the delay histograms\n", argv[0]);
		goto out;
	}
	/* One side: --node, or the attachment's first node (sub: its second, when it serves two).
	 * Both: its first two (1 and 2). */
	int both = do_pub && do_sub && !all;
	unsigned deflt = !do_pub && imago_node_count(im) > 1 ? 1 : 0;
	uint64_t own = o.node ? o.node : imago_node_id(im, deflt);
	uint64_t pub_node = both ? imago_node_id(im, 0) : own, sub_node = both ? imago_node_id(im, 1) : own;
	s.own = sub_node;
	rc = 2;
	if (p.ord && order_self(&ord, own, argv[0]) < 0) goto out;
	rc = 1;
	uint32_t sub_flags = IMAGO_GROUP_RECV | (o.from_oldest ? IMAGO_GROUP_FROM_OLDEST : 0);
	uint32_t pub_flags = IMAGO_GROUP_SEND | (o.nack ? IMAGO_GROUP_NACK : 0);
	if (all) { /* one endpoint, both ways */
		if (!(p.ep = s.ep = open_group(im, &o, pub_node, pub_flags | sub_flags, p.ord, argv[0]))) goto out;
	} else {
		if (do_sub && !(s.ep = open_group(im, &o, sub_node, sub_flags, NULL, argv[0]))) goto out;
		if (do_pub && !(p.ep = open_group(im, &o, pub_node, pub_flags, NULL, argv[0]))) goto out;
	}
	if (do_pub && ex_check_size(p.ep, "--size", p.slot, argv[0]) < 0) goto out; /* its largest message */
	if (do_pub && (p.scratch = malloc((size_t)32 * p.slot)) == NULL) { /* a burst of messages the endpoint takes */
		fprintf(stderr, "%s: no memory for a burst of 32 messages of %u bytes\n", argv[0], p.slot);
		goto out;
	}
	rc = run(&p, &s, &o, do_pub, do_sub);
	if (rc < 0) fprintf(stderr, "%s: %s\n", argv[0], strerror(-rc));
	if (ex_stop) printf("%s: stopped by a signal\n", o.role);
	int bad = 0;
	if (do_pub) print_pub(&p, &o, pub_node, im);
	if (do_sub) bad = print_sub(&s, &o, sub_node, im, ex_stop || rc == -ETIMEDOUT);
	if (ex_output_lost(argv[0])) bad = 1;
	if (s.log_file && write_log(&s, s.log_file, o.order_log, argv[0]) < 0) bad = 1;
	s.log_file = NULL; /* closed */
	rc = rc < 0 || bad ? 1 : 0;
out:
	imago_detach(im);
	if (s.log_file) fclose(s.log_file); /* not written: the run did not start */
	free(p.scratch);
	free(s.log);
	free(s.delays);
	return rc;
}
