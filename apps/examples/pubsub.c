/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * imago-pubsub: a publisher sends --count numbered, checksummed messages on one endpoint and
 * a subscriber checks that each arrives once, in order and intact, then prints RESULT.
 * `both` runs the two in this process (embedded by default); `pub` and `sub` attach to an
 * imagod (--secondary PREFIX) as two applications.
 */
#include "example.h"

static const char *const roles[] = {"pub", "sub", "both", NULL};
static const char help[] =
	"Usage: %s [pub|sub|both: both] [options] [-- imagod options of an embedded node]\n"
	"  (an option's value follows it, or is joined to it by '=': --timeout 5, --timeout=5)\n"
	"  (embedded with -- ... --run-to-completion, this thread polls the node too)\n"
	"  --secondary PREFIX  attach to the imagod started with --file-prefix PREFIX [embedded]\n"
	"  --node ID           this process's node, 1..4294967295 [pub 1, sub 2]\n"
	"  --peer ID           its peer's node, 1..4294967295 [the other node, or the only --peer of a\n"
	"                      one-node embedded command line]\n"
	"  --name NAME         endpoint name [pubsub]\n"
	"  --count N           messages, 1..18446744073709551615 [1000000]\n"
	"  --size B | A-B      message bytes, 16..4294967295, or spread over A..B [64]\n"
	"  --hold K            sub: keep the last K messages unreleased, 0..16777216 [0]\n"
	"  --zero-copy         pub: write into imago_buf_alloc() buffers, imago_send_zc()\n"
	"  --timeout S         give up after S seconds without progress, 0..1000000 [0: never]\n"
	"(--hold is refused for pub, --zero-copy for sub: that role would ignore it; --node and --peer\n"
	" for both, which runs nodes 1 and 2; an option not listed here, as unknown: exit 2.)\n"
	"Each side prints 'ROLE: peer ready' and 'ROLE: peer gone (its endpoint closed, or its node\n"
	"died)' as its peer's endpoint comes and goes. The subscriber remembers which of the last\n"
	"16777216 sequence numbers below the highest it got came (fixed memory, whatever --count): an\n"
	"older one (imago delivers in order: none should come) counts as reordered.\n";
/* Options one role ignores: refused there (ex_parse()). */
static const char *const only[] = {"--hold", "sub, both", "--zero-copy", "pub, both", "--node", "pub, sub",
				   "--peer", "pub, sub", NULL};

struct pub { imago_ep_t *ep; uint64_t next, bytes, t0; int ready, done; char *scratch; const char *prog; };
/* The subscriber's memory of what came: a bit per sequence number, for the kSeenMax below the
 * highest one received (top), in a ring (seq % window): fixed memory, whatever --count. */
static const uint64_t kSeenMax = UINT64_C(1) << 24;

struct sub {
	imago_ep_t *ep; uint8_t *seen; struct imago_msg *held;
	uint64_t window; /* bits of seen: --count, at most kSeenMax */
	uint64_t delivered, distinct, bytes, top, lost_end, dup, reord, bad, t0, t1, nheld, pos;
	int done, ready;
};

static int seen_has(const struct sub *s, uint64_t seq)
{
	const uint64_t b = seq % s->window;
	return s->seen[b / 8] >> b % 8 & 1;
}

static void seen_set(struct sub *s, uint64_t seq, int on)
{
	const uint64_t b = seq % s->window;
	s->seen[b / 8] = (uint8_t)(on ? s->seen[b / 8] | 1u << b % 8 : s->seen[b / 8] & ~(1u << b % 8));
}

/* Note @p seq, not a duplicate: at or above top its bits take over from those a window below
 * (forgotten), below top within the window it is late. */
static void seen_note(struct sub *s, uint64_t seq)
{
	if (seq >= s->top && seq - s->top >= s->window) memset(s->seen, 0, (size_t)((s->window + 7) / 8));
	else for (uint64_t k = s->top; k < seq; ++k) seen_set(s, k, 0); /* amortized: top only grows */
	if (seq >= s->top || s->top - seq <= s->window) seen_set(s, seq, 1);
	s->reord += seq < s->top, s->distinct++;
	s->top = seq >= s->top ? seq + 1 : s->top;
}

/* Send what the tx ring takes now, up to a burst. @return messages taken, or -errno. */
static int pub_step(struct pub *p, const struct ex_opts *o)
{
	int ready = imago_peer_ready(p->ep);
	if (ready < 0) return ready; /* -ENOTCONN: imagod is gone */
	if (ready && p->t0 == 0) p->t0 = ex_now_ns();
	if (ready != p->ready) ex_say_peer("pub", ready);
	/* Ready, imago_max_message() is also what the peer's node takes (its --max-message). */
	if (ready && !p->ready && ex_check_size(p->ep, "--size", o->size_max, p->prog) < 0) return -EMSGSIZE;
	p->ready = ready;
	if (p->done) return 0;
	struct imago_iov iov[32];
	unsigned n = 0;
	for (uint64_t s = p->next; n < 32 && s <= o->count; ++s, ++n) {
		uint32_t len = s == o->count ? EX_HDR : ex_size(o, s);
		void *buf = p->scratch + (size_t)n * o->size_max;
		if (o->zero_copy) {
			int rc = imago_buf_alloc(p->ep, len, &buf);
			if (rc < 0) return rc == -EAGAIN ? 0 : rc;
			ex_fill(buf, s == o->count ? EX_END : s, len);
			if ((rc = imago_send_zc(p->ep, buf, len, 0)) < 0) /* the buffer is still ours */
				return imago_buf_free(p->ep, buf), rc == -EAGAIN ? 0 : rc;
			p->bytes += s < o->count ? len : 0, p->next++, p->done = p->next > o->count;
			return 1;
		}
		ex_fill(buf, s == o->count ? EX_END : s, len);
		iov[n] = (struct imago_iov){buf, len};
	}
	int k = imago_send_burst(p->ep, iov, n, 0);
	for (int i = 0; i < k; ++i) p->bytes += p->next + (uint64_t)i < o->count ? iov[i].len : 0;
	p->next += k > 0 ? (uint64_t)k : 0;
	p->done = p->next > o->count;
	return k;
}

/* Check what arrived; keep the last --hold descriptors. @return messages, or -errno. */
static int sub_step(struct sub *s, const struct ex_opts *o)
{
	int ready = imago_peer_ready(s->ep);
	if (ready >= 0 && ready != s->ready) ex_say_peer("sub", ready), s->ready = ready;
	struct imago_msg m[32];
	int n = imago_recv_burst(s->ep, m, 32);
	for (int i = 0; i < n; ++i) {
		uint64_t seq;
		if (s->t0 == 0) s->t0 = ex_now_ns();
		int bad = ex_check(imago_msg_data(&m[i]), m[i].len, &seq) < 0;
		if (bad || (seq != EX_END && (seq >= o->count || m[i].len != ex_size(o, seq)))) {
			s->bad++;
		} else if (seq == EX_END) {
			s->done = 1;
			s->lost_end = o->count - s->distinct;
			continue;
		} else if (seq < s->top && s->top - seq <= s->window && seen_has(s, seq)) {
			s->dup++;
		} else {
			seen_note(s, seq); /* new, or late (below top; older than the window, not told from a dup) */
		}
		s->delivered++, s->bytes += m[i].len, s->t1 = ex_now_ns();
		if (o->hold == 0) continue;
		if (s->nheld == o->hold) imago_release(s->ep, &s->held[s->pos], 1);
		s->held[s->pos] = m[i], s->pos = (s->pos + 1) % o->hold;
		s->nheld += s->nheld < o->hold;
	}
	if (n > 0 && o->hold == 0) imago_release(s->ep, m, (unsigned)n);
	s->done |= s->distinct == o->count;
	return n;
}

int main(int argc, char **argv)
{
	struct ex_opts o = {.name = "pubsub", .count = 1000000, .size_min = 64, .size_max = 64, .only = only,
			    .own = " --secondary --node --peer --name --count --size --hold --zero-copy --timeout "};
	int rc = ex_parse(argc, argv, &o, roles, help);
	if (rc) return rc == 1 ? 0 : rc;
	int do_pub = strcmp(o.role, "sub") != 0, do_sub = strcmp(o.role, "pub") != 0;
	imago_t *im;
	const int attached = ex_attach(&o, argv[0], &im);
	if (attached < 0) return ex_attach_status(&o, attached);
	rc = 1;
	struct pub p = {.prog = argv[0]};
	struct sub s = {.window = o.count < kSeenMax ? o.count : kSeenMax};
	if (do_sub && ((s.seen = calloc((size_t)(s.window + 7) / 8, 1)) == NULL ||
		       (s.held = calloc(o.hold + 1, sizeof(struct imago_msg))) == NULL)) {
		fprintf(stderr, "%s: no memory to track %llu messages and hold %u\n", argv[0], (unsigned long long)s.window,
			o.hold);
		goto out;
	}
	uint64_t pub_node = do_pub && o.node ? o.node : 1, sub_node = do_sub && o.node ? o.node : 2;
	if (do_sub && !(s.ep = ex_open(im, &o, sub_node, do_pub ? pub_node : o.peer, argv[0]))) goto out;
	if (do_pub && !(p.ep = ex_open(im, &o, pub_node, do_sub ? sub_node : o.peer, argv[0]))) goto out;
	if (do_pub && ex_check_size(p.ep, "--size", o.size_max, argv[0]) < 0) goto out;
	if (do_sub && ex_check_size(s.ep, "--size", o.size_max, argv[0]) < 0) goto out; /* it could never come */
	if (do_pub && (p.scratch = malloc((size_t)32 * o.size_max)) == NULL) { /* a burst */
		fprintf(stderr, "%s: no memory for a burst of 32 messages of %u bytes\n", argv[0], o.size_max);
		goto out;
	}
	uint64_t last = ex_now_ns(), seen = 0;
	int finished = 0;
	rc = 0;
	while (!ex_stop && rc >= 0 && !finished) {
		ex_poll();
		rc = do_pub ? pub_step(&p, &o) : 0;
		if (rc >= 0 && do_sub) rc = sub_step(&s, &o);
		finished = do_sub ? s.done : p.done;
		uint64_t now = ex_now_ns(), progress = p.next + s.delivered;
		if (progress != seen) seen = progress, last = now;
		else if (o.timeout_s > 0 && (double)(now - last) > o.timeout_s * 1e9) rc = -ETIMEDOUT;
	}
	if (rc >= 0 && do_pub && !do_sub && p.done) rc = ex_drain(p.ep, o.count + 1, o.timeout_s);
	if (rc >= 0 && do_pub && !do_sub && p.done && !o.prefix) rc = ex_settle(im, o.timeout_s);
	if (rc < 0) fprintf(stderr, "%s: %s\n", argv[0], strerror(-rc));
	if (ex_stop) printf("%s: stopped by a signal\n", o.role);
	struct imago_ep_stats st = {0};
	if (s.ep) imago_stats(s.ep, &st);
	uint64_t lost = s.done ? s.lost_end : s.top - s.distinct;
	uint64_t sent = do_pub ? (p.next > o.count ? o.count : p.next) : o.count;
	printf("RESULT {\"mode\":\"pubsub\",\"role\":\"%s\",\"msgs_sent\":%llu,", o.role, (unsigned long long)sent);
	if (do_pub) printf("\"bytes_sent\":%llu,", (unsigned long long)p.bytes);
	if (do_sub) {
		printf("\"msgs_delivered\":%llu,\"bytes_delivered\":%llu,", (unsigned long long)s.delivered,
		       (unsigned long long)s.bytes);
		ex_print_rate(s.delivered, s.bytes, s.t1 > s.t0 ? s.t1 - s.t0 : 0); /* none but the last: 0 */
		printf(",\"lost\":%llu,\"duplicated\":%llu,\"reordered\":%llu,\"corrupted\":%llu,\"held\":%llu,"
		       "\"rx_inline\":%llu,\"rx_pool\":%llu,\"rx_mbuf\":%llu}\n",
		       (unsigned long long)lost, (unsigned long long)s.dup, (unsigned long long)s.reord,
		       (unsigned long long)s.bad, (unsigned long long)s.nheld, (unsigned long long)st.rx_inline,
		       (unsigned long long)st.rx_pool, (unsigned long long)st.rx_mbuf);
	} else {
		ex_print_rate(sent, p.bytes, p.t0 ? ex_now_ns() - p.t0 : 0);
		imago_stats(p.ep, &st); /* tx_ring_full: sends refused for back-pressure */
		/* What the peer node's restarts or death cost: messages dropped unconfirmed. */
		/* tx_invalid: taken on the ring, then discarded (above what the peer's node takes). */
		printf(",\"peer_ready\":%d,\"tx_ring_full\":%llu,\"tx_invalid\":%llu,\"peer_resets\":%llu,\"peer_deaths\":%llu,"
		       "\"msgs_unconfirmed\":%llu,\"last_unconfirmed_first\":%llu,\"last_unconfirmed_count\":%llu}\n",
		       p.ready, (unsigned long long)st.tx_ring_full, (unsigned long long)st.tx_invalid,
		       (unsigned long long)st.peer_resets,
		       (unsigned long long)st.peer_deaths, (unsigned long long)st.msgs_unconfirmed,
		       (unsigned long long)st.last_unconfirmed_first, (unsigned long long)st.last_unconfirmed_count);
	}
	rc = rc < 0 || (do_sub && (lost || s.dup || s.reord || s.bad)) || ex_output_lost(argv[0]) ? 1 : 0;
out:
	if (s.ep && s.nheld) imago_release(s.ep, s.held, (unsigned)s.nheld); /* or let detach reclaim them */
	imago_detach(im);
	free(p.scratch), free(s.seen), free(s.held);
	return rc;
}
