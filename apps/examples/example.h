/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the two examples share, written against the public API (imago.h) only: the command
 * line, attaching (embedded or to imagod), opening an endpoint, signals, the clock, and a
 * self-checking message: {seq, len, checksum} then bytes derived from seq.
 */
#ifndef IMAGO_EXAMPLE_H
#define IMAGO_EXAMPLE_H
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <imago.h>

#define EX_END UINT64_MAX /* seq of the last message: "no more" */
#define EX_HDR 16u        /* bytes of the header below, the smallest message */
#define EX_MAX_MEMBERS 64u /* imago-group, imago-cp: the most members (and sources) they track */
#define EX_NODE_MAX UINT32_MAX /* node ids are 32-bit: imagod's --node-id 1..4294967295 */
#define EX_HOLD_MAX 16777216u  /* pubsub's --hold: imagod's largest --pool-buffers */

struct ex_hdr {
	uint64_t seq;
	uint32_t len;
	uint32_t sum; /* FNV-1a (64-bit words, folded) over seq, len and the bytes after the header */
};

struct ex_opts {
	const char *role, *prefix, *name;
	uint64_t node, peer, count; /* node, peer: 1..EX_NODE_MAX */
	uint32_t size_min, size_max, hold, zero_copy, use_wait;
	double timeout_s;
	/* Every option the example takes, " --a --b ": ex_parse() refuses any other as unknown
	 * (an option it would ignore is not taken silently). */
	const char *own;
	/* Options of some roles only: pairs {"--option", "role, role"}, NULL-ended (NULL: none). */
	const char *const *only;
	uint32_t group, members, from_oldest, nack, wait_end;
	double rate;
	uint32_t idle_us, fastpath;
	const char *members_list, *order, *order_log; /* --members ID,ID,..; --order; --order-log */
	uint32_t order_window;
	/* After `--`: an imagod command line for an embedded attachment (argv[0] included). */
	int node_argc;
	char **node_argv;
};

static volatile sig_atomic_t ex_stop;
static void ex_on_signal(int sig) { (void)sig; ex_stop = ex_stop < 2 ? ex_stop + 1 : 2; } /* 2: again */

/* SIGINT, SIGTERM and SIGHUP (a terminal closed) stop the run cleanly: the application
 * detaches, and an embedded node removes its runtime directory. SIGPIPE is ignored: a reader
 * of stdout gone (`| head -1`) is a write error, not a death that leaves those files. */
static inline void ex_install_signals(void)
{
	struct sigaction sa = {.sa_handler = ex_on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static inline uint64_t ex_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The size of message @p seq: fixed, or spread over [size_min, size_max]. */
static inline uint32_t ex_size(const struct ex_opts *o, uint64_t seq)
{
	return o->size_min + (uint32_t)((seq * 7919u) % (o->size_max - o->size_min + 1u));
}

static inline uint32_t ex_sum(const uint8_t *p, uint32_t len)
{
	/* FNV-1a, 64 bits, a word at a time (a byte at a time took more of a small message's
	 * cycles than imago did): seq and len, then the bytes after the header. */
	uint64_t h = 14695981039346656037u, w = 0;
	memcpy(&w, p, 8);
	h = (h ^ w) * 1099511628211u;
	w = 0;
	memcpy(&w, p + 8, 4);
	h = (h ^ w) * 1099511628211u;
	uint32_t i = EX_HDR;
	for (; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 1099511628211u;
	}
	for (; i < len; ++i) h = (h ^ p[i]) * 1099511628211u;
	return (uint32_t)(h ^ (h >> 32));
}

/* Write message @p seq of @p len bytes (>= EX_HDR) into @p buf. */
static inline void ex_fill(void *buf, uint64_t seq, uint32_t len)
{
	uint8_t *p = buf;
	struct ex_hdr h = {seq, len, 0};
	memcpy(p, &h, EX_HDR);
	for (uint32_t i = EX_HDR; i < len; ++i) p[i] = (uint8_t)(seq * 131u + i);
	h.sum = ex_sum(p, len);
	memcpy(p + offsetof(struct ex_hdr, sum), &h.sum, sizeof h.sum);
}

/* @return 0 and *seq when @p len bytes at @p data are an intact message, -1 otherwise. */
static inline int ex_check(const void *data, uint32_t len, uint64_t *seq)
{
	struct ex_hdr h;
	if (len < EX_HDR) return -1;
	memcpy(&h, data, EX_HDR);
	*seq = h.seq;
	return h.len == len && h.sum == ex_sum(data, len) ? 0 : -1;
}

/* Parse `prog ROLE [options]`. @return 0, 1 (--help printed), or 2 (bad line, said why). */
static inline int ex_is_role(const char *a, const char *const roles[])
{
	for (int i = 0; roles[i] != NULL; ++i)
		if (!strcmp(a, roles[i])) return 1;
	return 0;
}

/* Option @p opt's value @p v as a whole number in [lo, hi] into *out. @return 0, or -1 said. */
static inline int ex_uint(const char *prog, const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end = NULL;
	errno = 0;
	const int digit = v[0] >= '0' && v[0] <= '9'; /* decimal only: no sign, space or 0x */
	unsigned long long x = digit ? strtoull(v, &end, 10) : 0;
	if (!digit || end == v || *end != 0 || errno != 0 || x < lo || x > hi) {
		fprintf(stderr, "%s: %s takes a whole number from %llu to %llu, not '%s'\n", prog, opt,
			(unsigned long long)lo, (unsigned long long)hi, v);
		return -1;
	}
	*out = x;
	return 0;
}

/* As ex_uint() for a 32-bit field. */
static inline int ex_u32(const char *prog, const char *opt, const char *v, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t x;
	if (ex_uint(prog, opt, v, lo, hi, &x) < 0) return -1;
	*out = (uint32_t)x;
	return 0;
}

/* Option @p opt's value @p v as a number in [lo, hi] into *out: decimal, as the whole numbers
 * (digits with at most one '.': no sign, space, exponent, 0x, inf or nan, which strtod() takes).
 * @return 0, or -1 said. */
static inline int ex_real(const char *prog, const char *opt, const char *v, double lo, double hi, double *out)
{
	int ok = 1, digits = 0, dots = 0;
	for (const char *c = v; *c != 0 && ok; ++c)
		digits += *c >= '0' && *c <= '9', dots += *c == '.', ok = (*c >= '0' && *c <= '9') || *c == '.';
	char *end = NULL;
	double x = ok && digits > 0 && dots <= 1 ? strtod(v, &end) : -1;
	if (end == NULL || *end != 0 || !(x >= lo && x <= hi)) {
		fprintf(stderr, "%s: %s takes a number from %.15g to %.15g (decimal: 2, 0.5), not '%s'\n", prog, opt, lo, hi, v);
		return -1;
	}
	*out = x;
	return 0;
}

/* --size B or A-B: whole numbers from EX_HDR to UINT32_MAX, A <= B. @return 0, or -1 said. */
static inline int ex_size_opt(const char *prog, const char *v, uint32_t *lo, uint32_t *hi)
{
	char a[24] = "", *end;
	const char *dash = strchr(v, '-'), *b = dash ? dash + 1 : v;
	const size_t n = dash ? (size_t)(dash - v) : strlen(v);
	unsigned long long x = 0, y = 0;
	int ok = n > 0 && n < sizeof a && strspn(v, "0123456789") == n && b[0] != 0 && strspn(b, "0123456789") == strlen(b);
	if (ok) {
		memcpy(a, v, n);
		errno = 0;
		x = strtoull(a, &end, 10), y = strtoull(b, &end, 10);
		ok = errno == 0 && x >= EX_HDR && x <= y && y <= UINT32_MAX;
	}
	if (!ok) {
		fprintf(stderr, "%s: --size takes B or A-B, whole numbers from %u to %u with A <= B, not '%s'\n", prog,
			EX_HDR, UINT32_MAX, v);
		return -1;
	}
	*lo = (uint32_t)x, *hi = (uint32_t)y;
	return 0;
}

/* `--name=VALUE`: @return the name (copied into @p buf of @p n bytes) with *v the value; any
 * other argument as it is, *v NULL. */
static inline const char *ex_opt_split(const char *arg, char *buf, size_t n, const char **v)
{
	const char *eq = arg[0] == '-' && arg[1] == '-' ? strchr(arg, '=') : NULL;
	if (eq != NULL && (size_t)(eq - arg) >= n) eq = NULL; /* no option is that long: unknown */
	*v = eq ? eq + 1 : NULL;
	if (eq == NULL) return arg;
	snprintf(buf, n, "%.*s", (int)(eq - arg), arg);
	return buf;
}

/* @return 1 when @p word is one of the comma-separated words of @p list. */
static inline int ex_has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *c = list; (c = strstr(c, word)) != NULL; c += n)
		if ((c == list || c[-1] == ' ' || c[-1] == ',') && (c[n] == 0 || c[n] == ','))
			return 1;
	return 0;
}

/* Refuse an option of o->only given to a role that does not use it (it would be ignored
 * silently). @p given: bit k set when pair k was on the line. @return 0, or 2 (said why). */
static inline int ex_check_roles(const struct ex_opts *o, uint64_t given, const char *prog)
{
	for (unsigned k = 0; o->only != NULL && o->only[2 * k] != NULL; ++k)
		if ((given >> k & 1) && !ex_has_word(o->only[2 * k + 1], o->role))
			return fprintf(stderr, "%s: %s is for %s only (see --help)\n", prog, o->only[2 * k],
				       o->only[2 * k + 1]), 2;
	return 0;
}

/* Refuse to send messages of up to @p len bytes on @p ep when it takes fewer (the node's
 * --max-message, say): before any traffic, not as a failed send mid-run. @return 0 or -1. */
static inline int ex_check_size(imago_ep_t *ep, const char *opt, uint32_t len, const char *prog)
{
	uint32_t max = imago_max_message(ep);
	if (len <= max) return 0;
	fprintf(stderr, "%s: %s: a message of %u bytes is above the largest this endpoint takes, %u bytes "
		"(imago_max_message(): the node's --max-message, and once the peer is ready its node's)\n", prog, opt,
		len, max);
	return -1;
}

/* Standard output that failed (its reader gone: SIGPIPE is ignored; a full disk): what was
 * printed, the RESULT line among it, is lost; said on stderr. @return 1 then, else 0. */
static inline int ex_output_lost(const char *prog)
{
	if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
	fprintf(stderr, "%s: standard output cannot be written (%s): the RESULT line is lost\n", prog,
		errno ? strerror(errno) : "write error");
	return 1;
}

/* Say that the peer's endpoint is now @p ready (imago_peer_ready()) or gone, as @p role. */
static inline void ex_say_peer(const char *role, int ready)
{
	printf("%s: peer %s\n", role, ready ? "ready" : "gone (its endpoint closed, or its node died)");
	fflush(stdout);
}

/* The end of a wait of @p timeout_s seconds from now; 0 s: never. */
static inline uint64_t ex_deadline(double timeout_s)
{
	return timeout_s > 0 ? ex_now_ns() + (uint64_t)(timeout_s * 1e9) : UINT64_MAX;
}

/* @p roles: NULL-terminated; the third is the default (both sides in one process). */
static inline int ex_parse(int argc, char **argv, struct ex_opts *o, const char *const roles[], const char *help)
{
	static const char valued[] = " --secondary --name --node --peer --count --size --hold --timeout --group --members --rate "
				     "--idle-us --order --order-window --order-log ";
	uint64_t given = 0; /* o->only's options on the line */
	o->role = roles[2];
	for (int i = 1; i < argc; ++i) {
		const char *v = NULL;
		char key[40], name[32];
		const char *a = ex_opt_split(argv[i], name, sizeof name, &v);
		int bad = 0;
		snprintf(key, sizeof key, " %s ", a);
		if (!strcmp(a, "--")) { /* the rest is the embedded node's command line */
			o->node_argc = argc - i;
			o->node_argv = argv + i;
			o->node_argv[0] = argv[0];
			break;
		}
		if (a[0] == '-' && strcmp(a, "--help") && strstr(o->own, key) == NULL) /* not this example's */
			return fprintf(stderr, "%s: unknown argument '%s' (see --help)\n", argv[0], argv[i]), 2;
		int valued_opt = a[0] == '-' && strstr(valued, key) != NULL;
		if (v != NULL && !valued_opt) return fprintf(stderr, "%s: %s takes no value\n", argv[0], a), 2;
		if (valued_opt && v == NULL) {
			if (i + 1 == argc) return fprintf(stderr, "%s: %s needs a value\n", argv[0], a), 2;
			v = argv[++i];
		}
		for (unsigned k = 0; o->only != NULL && o->only[2 * k] != NULL; ++k)
			given |= (uint64_t)!strcmp(a, o->only[2 * k]) << k;
		if (!strcmp(a, "--help")) return printf(help, argv[0]), 1;
		else if (a[0] != '-' && ex_is_role(a, roles)) o->role = a;
		else if (!strcmp(a, "--secondary")) o->prefix = v;
		else if (!strcmp(a, "--name")) o->name = v;
		else if (!strcmp(a, "--node")) bad = ex_uint(argv[0], a, v, 1, EX_NODE_MAX, &o->node);
		else if (!strcmp(a, "--peer")) bad = ex_uint(argv[0], a, v, 1, EX_NODE_MAX, &o->peer);
		else if (!strcmp(a, "--count")) bad = ex_uint(argv[0], a, v, 1, UINT64_MAX, &o->count);
		else if (!strcmp(a, "--hold")) bad = ex_u32(argv[0], a, v, 0, EX_HOLD_MAX, &o->hold);
		else if (!strcmp(a, "--timeout")) bad = ex_real(argv[0], a, v, 0, 1e6, &o->timeout_s); /* 0: never */
		else if (!strcmp(a, "--group")) bad = ex_u32(argv[0], a, v, 1, UINT32_MAX, &o->group);
		else if (!strcmp(a, "--members")) { /* N, or a list of node ids (N: the others) */
			o->members_list = strchr(v, ',') ? v : NULL;
			if (o->members_list == NULL) bad = ex_u32(argv[0], a, v, 1, EX_MAX_MEMBERS, &o->members);
		} else if (!strcmp(a, "--from-oldest")) o->from_oldest = 1;
		else if (!strcmp(a, "--wait-end")) o->wait_end = 1;
		else if (!strcmp(a, "--nack")) o->nack = 1;
		else if (!strcmp(a, "--rate")) bad = ex_real(argv[0], a, v, 0, 1e9, &o->rate);
		else if (!strcmp(a, "--idle-us")) bad = ex_u32(argv[0], a, v, 0, UINT32_MAX, &o->idle_us);
		else if (!strcmp(a, "--fastpath")) o->fastpath = 1;
		else if (!strcmp(a, "--order")) o->order = v;
		else if (!strcmp(a, "--order-window")) bad = ex_u32(argv[0], a, v, 1, 4096, &o->order_window);
		else if (!strcmp(a, "--order-log")) o->order_log = v;
		else if (!strcmp(a, "--zero-copy")) o->zero_copy = 1;
		else if (!strcmp(a, "--wait")) o->use_wait = 1;
		else if (!strcmp(a, "--size")) bad = ex_size_opt(argv[0], v, &o->size_min, &o->size_max);
		else return fprintf(stderr, "%s: unknown argument '%s' (see --help)\n", argv[0], argv[i]), 2;
		if (bad) return 2;
	}
	if (ex_check_roles(o, given, argv[0])) return 2;
	if (o->prefix == NULL && o->node_argc == 0 && strcmp(o->role, roles[2]))
		return fprintf(stderr, "%s: '%s' alone needs --secondary PREFIX (an imagod) or -- and a node's "
			       "command line; embedded by default runs '%s'\n", argv[0], o->role, roles[2]), 2;
	ex_install_signals();
	return 0;
}

/* The attachment this thread drives when its embedded node runs to completion (`-- ...
 * --run-to-completion`: no engine lcore), NULL otherwise: every wait loop of the examples
 * calls ex_poll(), so nothing waits on a node nobody polls. One thread a process. */
static imago_t *ex_rtc;

/* Poll the engines if this thread drives them. @return work done (0 when not ours). */
static inline int ex_poll(void)
{
	return ex_rtc ? imago_engine_poll(ex_rtc) : 0;
}

/* Attach (embedded, or to the imagod of --secondary). @return 0 or a negative errno, said. */
static inline int ex_attach(const struct ex_opts *o, const char *prog, imago_t **im)
{
	int rc = o->prefix ? imago_attach_secondary(o->prefix, im) : imago_attach_embedded(o->node_argc, o->node_argv, im);
	if (rc < 0)
		fprintf(stderr, "%s: cannot attach %s%s: %s%s\n", prog, o->prefix ? "to imagod " : "embedded",
			o->prefix ? o->prefix : "", strerror(-rc),
			o->prefix && rc == -EIO ? " (no imagod runs with that --file-prefix, or it runs with --no-huge:"
						  " secondaries need hugepages)" : "");
	else
		ex_rtc = imago_engine_poll(*im) == -ENOTSUP ? NULL : *im;
	return rc;
}

/* The exit status of a failed ex_attach(): 2 for the embedded node's bad command line (as
 * imagod's, after the --), else 1. */
static inline int ex_attach_status(const struct ex_opts *o, int rc)
{
	return !o->prefix && rc == -EINVAL ? 2 : 1;
}

/* The one peer the embedded node's command line names (--peer ID, ID@MAC or ID@IP, once or
 * repeated for the same ID), else 0. */
static inline uint64_t ex_only_peer(const struct ex_opts *o)
{
	uint64_t found = 0;
	for (int i = 1; i < o->node_argc; ++i) {
		const char *a = o->node_argv[i], *v = NULL;
		if (!strcmp(a, "--peer") && i + 1 < o->node_argc) v = o->node_argv[++i];
		else if (!strncmp(a, "--peer=", 7)) v = a + 7;
		if (v == NULL) continue;
		const uint64_t id = strtoull(v, NULL, 10);
		if (found != 0 && id != found) return 0;
		found = id;
	}
	return found;
}

/* Open o->name on node @p local towards @p peer (0: the attachment's other node, or the only
 * peer a one-node embedded command line names). */
static inline imago_ep_t *ex_open(imago_t *im, const struct ex_opts *o, uint64_t local, uint64_t peer, const char *prog)
{
	for (unsigned i = 0; peer == 0 && i < imago_node_count(im); ++i)
		if (imago_node_id(im, i) != local) peer = imago_node_id(im, i);
	if (peer == 0 && o->prefix == NULL) peer = ex_only_peer(o);
	struct imago_ep_opts eo = {.local_node = local};
	imago_ep_t *ep = NULL;
	int rc = peer ? imago_open(im, o->name, peer, &eo, &ep) : -EINVAL;
	if (rc < 0)
		fprintf(stderr, "%s: cannot open endpoint '%s' on node %llu to node %llu%s: %s\n", prog, o->name,
			(unsigned long long)local, (unsigned long long)peer, peer ? "" : " (give --peer)", strerror(-rc));
	else
		printf("READY endpoint '%s' node %llu -> node %llu\n", o->name, (unsigned long long)local,
		       (unsigned long long)peer);
	fflush(stdout);
	return ep;
}

/*
 * Wait until the engine has taken @p total messages from @p ep (imago_stats().msgs_sent):
 * closing or detaching drops what it has not taken yet. @p timeout_s <= 0: no limit.
 * @return 0 or -ETIMEDOUT.
 */
static inline int ex_drain(imago_ep_t *ep, uint64_t total, double timeout_s)
{
	struct imago_ep_stats st;
	uint64_t end = timeout_s > 0 ? ex_now_ns() + (uint64_t)(timeout_s * 1e9) : UINT64_MAX;
	while (ex_poll(), imago_stats(ep, &st) == 0 && st.msgs_sent < total && !ex_stop)
		if (ex_now_ns() > end) return -ETIMEDOUT;
	return 0;
}

/*
 * Embedded: wait until this process's nodes have no message in flight (every message taken
 * is confirmed by its peer), since detaching stops their engines. @p timeout_s <= 0: no
 * limit. @return 0 or -ETIMEDOUT.
 */
static inline int ex_settle(const imago_t *im, double timeout_s)
{
	uint64_t end = timeout_s > 0 ? ex_now_ns() + (uint64_t)(timeout_s * 1e9) : UINT64_MAX;
	for (;;) {
		struct imago_node_stats st;
		uint64_t in_flight = 0;
		int rc;
		ex_poll();
		for (unsigned i = 0; (rc = imago_node_stats_get(im, i, &st)) != -EINVAL; ++i)
			in_flight += rc == 0 ? st.msgs_in_flight : 1; /* -EAGAIN: unknown, look again */
		if (in_flight == 0 || ex_stop) return 0;
		if (ex_now_ns() > end) return -ETIMEDOUT;
	}
}

/* The rate part of a RESULT line: duration_s, msgs_per_s, gbps (0 when no time passed: a
 * run that never started, say). */
static inline void ex_print_rate(uint64_t msgs, uint64_t bytes, uint64_t ns)
{
	double s = (double)ns / 1e9;
	printf("\"duration_s\":%.6f,\"msgs_per_s\":%.1f,\"gbps\":%.4f", s, ns ? (double)msgs / s : 0.0,
	       ns ? (double)bytes * 8 / s / 1e9 : 0.0);
}

/*
 * A latency histogram of fixed size, in imago-perf's shape (apps/common/histogram.h): exact
 * below 128, then 64 buckets per power of two (a percentile is off by under 1.6 %), any
 * uint64_t value. What a run keeps of its samples, whatever its --count.
 */
#define EX_HIST_LINEAR 128u
#define EX_HIST_PER_OCTAVE 64u
#define EX_HIST_BUCKETS (EX_HIST_LINEAR + (64u - 7u) * EX_HIST_PER_OCTAVE)

struct ex_hist {
	uint64_t n, min, max;
	uint64_t counts[EX_HIST_BUCKETS];
};

static inline unsigned ex_hist_bucket(uint64_t v)
{
	if (v < EX_HIST_LINEAR) return (unsigned)v;
	const unsigned shift = (unsigned)(63 - __builtin_clzll(v)) - 6;
	return (shift + 1) * EX_HIST_PER_OCTAVE + (unsigned)(v >> shift) - EX_HIST_PER_OCTAVE;
}

static inline void ex_hist_add(struct ex_hist *h, uint64_t v)
{
	h->counts[ex_hist_bucket(v)]++;
	h->min = h->n == 0 || v < h->min ? v : h->min;
	h->max = v > h->max ? v : h->max;
	h->n++;
}

/* @return the value at quantile @p q (0..1): the middle of its bucket, within [min, max]; the
 * first and the last exact (min, max); 0 when empty. */
static inline uint64_t ex_hist_at(const struct ex_hist *h, double q)
{
	if (h->n == 0) return 0;
	const double want = q * (double)h->n;
	uint64_t rank = (uint64_t)want, seen = 0; /* rounded up, 1-based: p50 of 4 is the 2nd */
	rank += (double)rank < want;
	rank = rank < 1 ? 1 : rank > h->n ? h->n : rank;
	if (rank == h->n || rank == 1) return rank == 1 ? h->min : h->max; /* the extremes are known exactly */
	for (unsigned i = 0; i < EX_HIST_BUCKETS; ++i) {
		if ((seen += h->counts[i]) < rank) continue;
		const unsigned shift = i < EX_HIST_LINEAR ? 0 : i / EX_HIST_PER_OCTAVE - 1;
		const uint64_t low = i < EX_HIST_LINEAR ? i : (uint64_t)(i % EX_HIST_PER_OCTAVE + EX_HIST_PER_OCTAVE) << shift;
		const uint64_t mid = low + ((UINT64_C(1) << shift) - 1) / 2;
		return mid < h->min ? h->min : mid > h->max ? h->max : mid;
	}
	return h->max;
}

#endif /* IMAGO_EXAMPLE_H */
