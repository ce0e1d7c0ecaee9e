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
 * end-to-end delay (p50, p99) and throughput.
 */
#include "example.h"

#include <sys/resource.h>

static const char *const roles[] = {"pub", "sub", "both", "all", NULL};
static const char help[] =
	"Usage: %s pub|sub|both|all [options] [-- imagod options of an embedded node]\n"
	"  all: send to the group and receive it on one endpoint (every node of a many-to-many\n"
	"       group runs it: --members is the other nodes, each a source too; --size >= 24)\n"
	"  --secondary PREFIX  attach to the imagod started with --file-prefix PREFIX [embedded]\n"
	"  --node ID           this process's node [the first; sub: the second of two; both: 1 and 2]\n"
	"  --group G           the group, 1..4294967295 [7]\n"
	"  --count N           messages to send (pub) or to expect from each source (sub) [100000]\n"
	"  --size B | A-B      message bytes (>= 16), or spread over A..B [64]\n"
	"  --members N         pub, all: send once N members joined (all: and expect N sources) [1]\n"
	"  --rate R            pub: at most R messages per second [0: as fast as the group takes]\n"
	"  --from-oldest       sub, all: start at the oldest message a source still holds\n"
	"  --nack              pub, all: a NACK-based stream (IMAGO_GROUP_NACK): the publisher never\n"
	"                      waits for a member; what a member misses for good it is told (EVENT\n"
	"                      lost, RESULT lost_reported). A subscriber fails on any gap no such\n"
	"                      event reported (lost_silently), whatever the stream's kind\n"
	"  --idle-us US        sleep US microseconds whenever a pass moved nothing (a core shared by\n"
	"                      many nodes; with --run-to-completion the node waits too) [0: spin]\n"
	"  --timeout S         give up after S seconds without progress [0: never]\n"
	"Prints READY once its group endpoint is open, EVENT lines, and one RESULT {json} line.\n";

enum { kMaxSources = 16, kMaxMembers = 64 };

struct pub {
	imago_ep_t *ep;
	uint64_t next, bytes, t0, t1;
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
	uint64_t *delay_ns; /* role all: per message, send to delivery (one clock: one host) */
	uint64_t n_delay;
};

struct sub {
	imago_ep_t *ep;
	struct source src[kMaxSources];
	unsigned n_src;
	uint64_t t0, t1, own, delay_cap;
	unsigned want_sources; /* role all: done once this many sources sent their last message */
	int done;
};

enum { kStampAt = EX_HDR, kStampMin = EX_HDR + 8 }; /* role all: send time after the header */

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

/* Write the send time after the header (the checksum covers it). */
static void stamp(uint8_t *buf, uint32_t len)
{
	uint64_t now = ex_now_ns();
	memcpy(buf + kStampAt, &now, sizeof now);
	uint32_t sum = ex_sum(buf, len);
	memcpy(buf + offsetof(struct ex_hdr, sum), &sum, sizeof sum);
}

/* Send what the tx ring takes now, up to a burst; the last message is "no more". */
static int pub_step(struct pub *p, const struct ex_opts *o)
{
	struct imago_iov iov[32];
	unsigned n = 0, room = 32;
	if (o->rate > 0) { /* paced: what is due by now */
		uint64_t due = (uint64_t)((double)(ex_now_ns() - p->t0) * o->rate / 1e9) + 1;
		room = due > p->next ? (unsigned)(due - p->next < 32 ? due - p->next : 32) : 0;
	}
	for (uint64_t s = p->next; n < room && s <= o->count; ++s, ++n) {
		uint32_t len = s == o->count ? EX_HDR : ex_size(o, s);
		void *buf = p->scratch + (size_t)n * o->size_max;
		ex_fill(buf, s == o->count ? EX_END : s, len);
		if (len >= kStampMin) stamp(buf, len);
		iov[n] = (struct imago_iov){buf, len};
	}
	int k = imago_send_burst(p->ep, iov, n, 0);
	for (int i = 0; i < k; ++i) p->bytes += p->next + (uint64_t)i < o->count ? iov[i].len : 0;
	p->next += k > 0 ? (uint64_t)k : 0;
	if (!p->done && p->next > o->count) p->done = 1;
	return k;
}

static struct source *source_of(struct sub *s, uint64_t id)
{
	for (unsigned i = 0; i < s->n_src; ++i)
		if (s->src[i].id == id) return &s->src[i];
	if (s->n_src == kMaxSources) return NULL;
	struct source *x = &s->src[s->n_src++];
	*x = (struct source){.id = id};
	if (s->delay_cap) x->delay_ns = malloc(s->delay_cap * sizeof(uint64_t));
	return x;
}

static void sub_event(struct sub *s, const struct imago_group_event *e)
{
	print_event("sub", e);
	struct source *x = source_of(s, e->source);
	if (x == NULL) return;
	if (e->kind == IMAGO_GROUP_STARTED) x->started++;
	if (e->kind == IMAGO_GROUP_ENDED) x->ended = 1, x->reason = (int)e->reason;
	if (e->kind == IMAGO_GROUP_LOST) x->lost_reported += e->count, x->lost_since = 1;
}

/* Check one message of source @p x: the first one sets where its stream started here. */
static void sub_message(struct source *x, const struct ex_opts *o, const uint8_t *data, uint32_t len)
{
	uint64_t seq, sent;
	if (x->delay_ns && len >= kStampMin && x->n_delay < o->count && ex_check(data, len, &seq) == 0) {
		memcpy(&sent, data + kStampAt, sizeof sent);
		x->delay_ns[x->n_delay++] = ex_now_ns() - sent;
	}
	if (x->t0 == 0) x->t0 = ex_now_ns();
	x->t1 = ex_now_ns();
	if (ex_check(data, len, &seq) < 0 || (seq != EX_END && (seq >= o->count || len != ex_size(o, seq)))) {
		x->bad++;
		return;
	}
	if (seq == EX_END) {
		x->got_end = 1;
		if (x->next != o->count && !x->lost_since) x->silent++;
		x->lost += o->count - x->next;
		x->next = o->count;
		return;
	}
	if (x->delivered == 0 && x->next == 0) x->first = x->next = seq; /* joined late: starts here */
	if (seq < x->next) {
		x->dup++;
		return;
	}
	x->lost += seq - x->next; /* a gap: never expected from imago, but after a LOST event */
	if (seq != x->next && !x->lost_since) x->silent++;
	x->lost_since = 0;
	x->next = seq + 1;
	x->delivered++, x->bytes += len;
}

/* Read one burst of @p ep: the events of our own stream go to @p p, the rest to @p s. */
static int read_ring(imago_ep_t *ep, struct pub *p, struct sub *s, const struct ex_opts *o)
{
	struct imago_msg m[32];
	int n = imago_recv_burst(ep, m, 32);
	for (int i = 0; i < n; ++i) {
		if (m[i].flags & IMAGO_MSG_F_EVENT) {
			struct imago_group_event e;
			memcpy(&e, imago_msg_data(&m[i]), sizeof e);
			if (p != NULL && (s == NULL || e.source == s->own)) pub_event(p, &e);
			else if (s != NULL) sub_event(s, &e);
			continue;
		}
		struct source *x = s != NULL ? source_of(s, m[i].src) : NULL;
		if (x == NULL) continue;
		if (s->t0 == 0) s->t0 = ex_now_ns();
		sub_message(x, o, imago_msg_data(&m[i]), m[i].len);
		s->t1 = ex_now_ns();
	}
	if (n > 0) imago_release(ep, m, (unsigned)n);
	if (s == NULL) return n;
	/* Done once every source that started here sent its last message or ended (all: once
	 * the sources expected did). */
	unsigned open = 0, any = 0, ended = 0;
	for (unsigned i = 0; i < s->n_src; ++i) {
		any |= s->src[i].started > 0;
		open += s->src[i].started > 0 && !s->src[i].got_end && !s->src[i].ended;
		ended += s->src[i].got_end || s->src[i].ended;
	}
	s->done = s->want_sources ? ended >= s->want_sources && !open : any && !open;
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Role all: the per-pair figures of a source (NASA's metrics): delay p50/p99, throughput. */
static void print_delay(struct source *x)
{
	if (x->n_delay == 0) return;
	qsort(x->delay_ns, x->n_delay, sizeof(uint64_t), cmp_u64);
	double s = x->t1 > x->t0 ? (double)(x->t1 - x->t0) / 1e9 : 1e-9;
	printf(",\"delay_us\":{\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f},\"msgs_per_s\":%.1f",
	       (double)x->delay_ns[x->n_delay / 2] / 1e3, (double)x->delay_ns[x->n_delay * 99 / 100] / 1e3,
	       (double)x->delay_ns[x->n_delay - 1] / 1e3, (double)x->delivered / s);
}

static imago_ep_t *open_group(imago_t *im, const struct ex_opts *o, uint64_t node, uint32_t flags, const char *prog)
{
	struct imago_group_opts go = {.local_node = node, .flags = flags};
	imago_ep_t *ep = NULL;
	int rc = imago_group_open(im, o->group, &go, &ep);
	if (rc < 0) {
		fprintf(stderr, "%s: cannot open group %u on node %llu: %s\n", prog, o->group, (unsigned long long)node,
			strerror(-rc));
		return NULL;
	}
	printf("READY group %u node %llu %s\n", o->group, (unsigned long long)node,
	       flags & IMAGO_GROUP_SEND ? "send" : "receive");
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
	struct imago_ep_stats st = {0};
	imago_stats(p->ep, &st);
	struct imago_node_stats ns = node_stats(im, node);
	/* CPU of this whole process (the node's engine lcore too, unless run-to-completion),
	 * busy-polling included: per message sent. */
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu_ns = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
			(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
	uint64_t sent = p->next > o->count ? o->count : p->next;
	printf("RESULT {\"mode\":\"group\",\"role\":\"pub\",\"node\":%llu,\"group\":%u,\"msgs_sent\":%llu,"
	       "\"bytes_sent\":%llu,",
	       (unsigned long long)node, o->group, (unsigned long long)sent, (unsigned long long)p->bytes);
	ex_print_rate(sent, p->bytes, p->t0 && p->t1 ? p->t1 - p->t0 : 0);
	printf(",\"members\":%u,\"view\":%u,\"pending\":%llu,\"joined\":%u,\"left\":%u,\"expired\":%u,\"expired_ids\":[",
	       st.group_members, st.group_view, (unsigned long long)st.group_pending, p->joined, p->left, p->expired);
	for (uint32_t i = 0; i < p->expired; ++i) printf("%s%llu", i ? "," : "", (unsigned long long)p->expired_ids[i]);
	printf("],\"tx_ring_full\":%llu,\"events_lost\":%llu,\"data_frames\":%llu,\"unicast_copies\":%llu,"
	       "\"repair_frames\":%llu,\"process_cpu_ns_per_msg\":%.1f}\n",
	       (unsigned long long)st.tx_ring_full, (unsigned long long)st.events_lost,
	       (unsigned long long)ns.group_data_frames, (unsigned long long)ns.group_unicast_copies,
	       (unsigned long long)ns.group_repair_frames, sent ? cpu_ns / (double)sent : 0.0);
}

static int print_sub(const struct sub *s, const struct ex_opts *o, uint64_t node, imago_t *im)
{
	struct imago_node_stats ns = node_stats(im, node);
	uint64_t delivered = 0, bytes = 0, lost = 0, dup = 0, bad = 0, reported = 0, silent = 0;
	printf("RESULT {\"mode\":\"group\",\"role\":\"sub\",\"node\":%llu,\"group\":%u,\"sources\":[", (unsigned long long)node,
	       o->group);
	for (unsigned i = 0; i < s->n_src; ++i) {
		const struct source *x = &s->src[i];
		/* A stream the source dropped us from (expired) ends early: what is missing is lost. */
		uint64_t missing = x->got_end ? 0 : o->count - x->next;
		printf("%s{\"source\":%llu,\"first\":%llu,\"delivered\":%llu,\"complete\":%s,\"ended\":\"%s\"", i ? "," : "",
		       (unsigned long long)x->id, (unsigned long long)x->first, (unsigned long long)x->delivered,
		       x->got_end ? "true" : "false", x->ended ? reason_name((uint32_t)x->reason) : "");
		print_delay((struct source *)x);
		printf("}");
		delivered += x->delivered, bytes += x->bytes, lost += x->lost + missing, dup += x->dup, bad += x->bad;
		reported += x->lost_reported;
		silent += x->silent + (missing && !x->lost_since);
	}
	printf("],\"msgs_delivered\":%llu,\"bytes_delivered\":%llu,", (unsigned long long)delivered,
	       (unsigned long long)bytes);
	ex_print_rate(delivered, bytes, s->t1 - s->t0);
	printf(",\"lost\":%llu,\"lost_reported\":%llu,\"lost_silently\":%llu", (unsigned long long)lost,
	       (unsigned long long)reported, (unsigned long long)silent);
	printf(",\"duplicated\":%llu,\"reordered\":0,\"corrupted\":%llu,\"frames_rejected\":%llu,"
	       "\"frames_not_allowed\":%llu,\"nacks_sent\":%llu}\n",
	       (unsigned long long)dup, (unsigned long long)bad, (unsigned long long)ns.frames_rejected, (unsigned long long)ns.frames_not_allowed,
	       (unsigned long long)ns.group_nacks_sent);
	/* Every gap must have come after a LOST event (only a NACK stream has them, when its
	 * source freed what this node still lacked): a silent one is a failure. */
	return silent != 0 || dup || bad || s->n_src == 0;
}

int main(int argc, char **argv)
{
	struct ex_opts o = {.count = 100000, .size_min = 64, .size_max = 64, .group = 7, .members = 1,
			    .own = " --group --members --from-oldest --nack --rate --idle-us "};
	int rc = ex_parse(argc, argv, &o, roles, help);
	if (rc) return rc == 1 ? 0 : rc;
	if (o.group == 0) return fprintf(stderr, "%s: --group must be 1..4294967295\n", argv[0]), 2;
	int do_pub = strcmp(o.role, "sub") != 0, do_sub = strcmp(o.role, "pub") != 0, all = !strcmp(o.role, "all");
	if (all && o.size_min < kStampMin)
		return fprintf(stderr, "%s: all needs --size >= %u (the send time travels in each message)\n", argv[0],
			       (unsigned)kStampMin), 2;
	imago_t *im;
	if (ex_attach(&o, argv[0], &im) < 0) return 1;
	struct pub p = {.scratch = malloc((size_t)32 * o.size_max)};
	struct sub s = {.want_sources = all ? o.members : 0, .delay_cap = all ? o.count : 0};
	/* One side: --node, or the attachment's first node (sub: its second, when it serves two).
	 * Both: its first two (1 and 2). */
	int both = do_pub && do_sub && !all;
	unsigned deflt = !do_pub && imago_node_count(im) > 1 ? 1 : 0;
	uint64_t own = o.node ? o.node : imago_node_id(im, deflt);
	uint64_t pub_node = both ? imago_node_id(im, 0) : own, sub_node = both ? imago_node_id(im, 1) : own;
	s.own = sub_node;
	rc = 1;
	uint32_t sub_flags = IMAGO_GROUP_RECV | (o.from_oldest ? IMAGO_GROUP_FROM_OLDEST : 0);
	uint32_t pub_flags = IMAGO_GROUP_SEND | (o.nack ? IMAGO_GROUP_NACK : 0);
	if (all) { /* one endpoint, both ways */
		if (!(p.ep = s.ep = open_group(im, &o, pub_node, pub_flags | sub_flags, argv[0]))) goto out;
	} else {
		if (do_sub && !(s.ep = open_group(im, &o, sub_node, sub_flags, argv[0]))) goto out;
		if (do_pub && !(p.ep = open_group(im, &o, pub_node, pub_flags, argv[0]))) goto out;
	}
	uint64_t last = ex_now_ns(), seen = 0;
	int finished = 0, inline_engines = 1;
	rc = 0;
	while (!ex_stop && rc >= 0 && !finished) {
		struct imago_ep_stats st = {0};
		/* Embedded with --run-to-completion, this thread drives the node too. */
		int work = inline_engines ? imago_engine_poll(im) : 0;
		if (work == -ENOTSUP) inline_engines = 0, work = 0;
		if (do_pub) {
			if (!all) work += read_ring(p.ep, &p, NULL, &o);
			imago_stats(p.ep, &st);
			if (st.group_members >= o.members && p.t0 == 0) p.t0 = ex_now_ns();
			if (p.t0 != 0 && !p.done) work += rc = pub_step(&p, &o);
		}
		if (rc >= 0 && do_sub) work += rc = read_ring(s.ep, all ? &p : NULL, &s, &o);
		if (work == 0 && o.idle_us > 0) { /* nothing moved: leave the core to others a while */
			struct timespec nap = {0, (long)o.idle_us * 1000};
			nanosleep(&nap, NULL);
		}
		/* The publisher is done once every member holds every message (closing loses none). */
		int pub_idle = !do_pub || (p.done && st.msgs_sent == o.count + 1 && st.group_pending == 0);
		if (do_pub && pub_idle && p.t1 == 0) p.t1 = ex_now_ns(); /* every member has everything */
		finished = pub_idle && (!do_sub || s.done);
		uint64_t now = ex_now_ns(), progress = p.next + st.msgs_sent + p.joined + s.t1;
		if (progress != seen) seen = progress, last = now;
		else if (o.timeout_s > 0 && (double)(now - last) > o.timeout_s * 1e9) rc = -ETIMEDOUT;
	}
	if (rc < 0) fprintf(stderr, "%s: %s\n", argv[0], strerror(-rc));
	if (ex_stop) printf("%s: stopped by a signal\n", o.role);
	int bad = 0;
	if (do_pub) print_pub(&p, &o, pub_node, im);
	if (do_sub) bad = print_sub(&s, &o, sub_node, im);
	fflush(stdout);
	rc = rc < 0 || bad ? 1 : 0;
out:
	imago_detach(im);
	free(p.scratch);
	for (unsigned i = 0; i < s.n_src; ++i) free(s.src[i].delay_ns);
	return rc;
}
