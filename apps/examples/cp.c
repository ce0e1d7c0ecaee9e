/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * imago-cp: one file to every member of a group (IBRMP's BOF, DATA, EOF and TRANSFER_DONE),
 * written against imago.h only. The sender waits for --members members, sends the file once
 * to the group, and reports per member: done (its checksum matched) or expired. Each
 * receiver writes the file into --out, checks its size and checksum, and tells the sender
 * over a peer endpoint ("imago-cp") towards it.
 */
#include "example.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char help[] =
	"Usage: %s send FILE | recv [options] [-- imagod options of an embedded node]\n"
	"  (an option's value follows it, or is joined to it by '=': --timeout 5, --timeout=5)\n"
	"  (embedded with -- ... --run-to-completion, this thread polls the node too)\n"
	"  --secondary PREFIX  attach to the imagod started with --file-prefix PREFIX [embedded]\n"
	"  --node ID           this process's node, 1..4294967295 [the attachment's first]\n"
	"  --group G           the group, 1..4294967295 [7]\n"
	"  --members N         send: start once N members joined, 1..64 [1]\n"
	"  --chunk BYTES       send: bytes per DATA message, 64..60000 [8192]\n"
	"  --out DIR           recv: the folder the file is written into [.]\n"
	"  --timeout S         give up after S seconds without progress, 0..1000000, 0: never [30]\n"
	"Prints READY, a line per member (send) or the file's fate (recv), and RESULT {json}.\n"
	"Refused before anything starts (exit 2): send's FILE when it cannot be opened for reading,\n"
	"is no regular file or its name is over 200 bytes; recv's --out when it is no folder this\n"
	"process may write into.\n";

enum { kBof = 1, kData = 2, kEof = 3, kDone = 4, kFailed = 5, kMaxMembers = EX_MAX_MEMBERS, kNameMax = 200 };

struct cp_opts {
	const char *file, *out;
	FILE *f;             /* send: FILE, opened before the node starts */
	struct stat at_open; /* ... and what it was then */
	const char *send_only, *recv_only; /* an option given for the other role, to refuse */
	uint64_t node;
	uint32_t group, members, chunk;
	double timeout_s;
	struct ex_opts ex; /* attach: prefix, embedded command line */
};

/* A control message: {type, size, checksum, name}; DATA is {type} then bytes. */
struct cp_ctl {
	uint8_t type, pad[7];
	uint64_t size, sum;
	char name[kNameMax + 1];
};

struct member {
	uint64_t id;
	imago_ep_t *ep; /* towards it, for its DONE */
	int state;      /* 0 joined, 1 done and matching, 2 done with another checksum, 3 expired, 4 failed */
};

static uint64_t fnv64(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* send FILE: open it now, before the node starts, so a file that is not there, not a regular
 * file, not readable or of too long a name is a refused command line. @return 0 or -1 (said). */
static int open_file(struct cp_opts *o, const char *prog)
{
	const char *base = strrchr(o->file, '/');
	base = base ? base + 1 : o->file;
	if (strlen(base) > kNameMax) /* cut, two names would meet at the receivers */
		return fprintf(stderr, "%s: send '%s': a name of more than %d bytes\n", prog, o->file, kNameMax), -1;
	int fd = open(o->file, O_RDONLY | O_NONBLOCK); /* a FIFO is refused below, not waited on */
	if (fd < 0) return fprintf(stderr, "%s: send '%s': %s\n", prog, o->file, strerror(errno)), -1;
	const char *why = fstat(fd, &o->at_open) != 0 ? strerror(errno)
			  : S_ISDIR(o->at_open.st_mode) ? "a folder, not a regular file"
			  : !S_ISREG(o->at_open.st_mode) ? "not a regular file"
			  : fcntl(fd, F_SETFL, 0) != 0 || (o->f = fdopen(fd, "rb")) == NULL ? strerror(errno) : NULL;
	if (why == NULL) return 0;
	fprintf(stderr, "%s: send '%s': %s\n", prog, o->file, why);
	return close(fd), -1;
}

/* recv --out DIR: a folder this process may create files in. @return 0 or -1 (said). */
static int check_out(const char *dir, const char *prog)
{
	struct stat st;
	const char *why = dir[0] == 0 ? "an empty name (the current folder: --out .)" : NULL;
	if (why == NULL && stat(dir, &st) != 0) why = strerror(errno);
	else if (why == NULL && !S_ISDIR(st.st_mode)) why = "not a folder";
	else if (why == NULL && access(dir, W_OK | X_OK) != 0) why = strerror(errno);
	if (why != NULL) fprintf(stderr, "%s: --out '%s': %s\n", prog, dir, why);
	return why ? -1 : 0;
}

static int parse(int argc, char **argv, struct cp_opts *o)
{
	for (int i = 1; i < argc; ++i) {
		char name[32];
		const char *v;
		const char *a = ex_opt_split(argv[i], name, sizeof name, &v);
		const int step = v == NULL; /* the value is the next argument: skip it */
		if (v == NULL) v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;
		if (!strcmp(a, "--")) {
			o->ex.node_argc = argc - i, o->ex.node_argv = argv + i, argv[i] = argv[0];
			break;
		}
		if (!strcmp(a, "--help")) return printf(help, argv[0]), 1;
		if (!strcmp(a, "send") && (v == NULL || !strcmp(v, "--")))
			return fprintf(stderr, "%s: send needs a FILE\n", argv[0]), 2;
		if (!strcmp(a, "send")) o->file = v, ++i;
		else if (!strcmp(a, "recv")) o->file = NULL, o->out = o->out ? o->out : ".";
		else if (a[0] == '-' && v == NULL) return fprintf(stderr, "%s: %s needs a value\n", argv[0], a), 2;
		else if (!strcmp(a, "--secondary")) o->ex.prefix = v, i += step;
		else if (!strcmp(a, "--node")) bad = ex_uint(argv[0], a, v, 1, EX_NODE_MAX, &o->node), i += step;
		else if (!strcmp(a, "--group")) bad = ex_u32(argv[0], a, v, 1, UINT32_MAX, &o->group), i += step;
		else if (!strcmp(a, "--members")) bad = ex_u32(argv[0], a, v, 1, kMaxMembers, &o->members), o->send_only = "--members", i += step;
		else if (!strcmp(a, "--chunk")) bad = ex_u32(argv[0], a, v, 64, 60000, &o->chunk), o->send_only = "--chunk", i += step;
		else if (!strcmp(a, "--out")) o->out = v, o->recv_only = "--out", i += step;
		else if (!strcmp(a, "--timeout")) bad = ex_real(argv[0], a, v, 0, 1e6, &o->timeout_s), i += step; /* 0: never */
		else return fprintf(stderr, "%s: unknown argument '%s' (see --help)\n", argv[0], argv[i]), 2;
		if (bad) return 2;
	}
	const char *other = o->file ? o->recv_only : o->send_only;
	if (other != NULL)
		return fprintf(stderr, "%s: %s is for %s only (see --help)\n", argv[0], other, o->file ? "recv" : "send"), 2;
	if ((o->file == NULL) == (o->out == NULL))
		return fprintf(stderr, "%s: give send FILE or recv (see --help)\n", argv[0]), 2;
	if ((o->file ? open_file(o, argv[0]) : check_out(o->out, argv[0])) < 0) return 2;
	ex_install_signals();
	return 0;
}

/* @p str as a JSON string: a file name may hold quotes, backslashes and control bytes. */
static void print_json_string(const char *str)
{
	putchar('"');
	for (const unsigned char *c = (const unsigned char *)str; *c; ++c) {
		if (*c == '"' || *c == '\\') printf("\\%c", *c);
		else if (*c < 0x20) printf("\\u%04x", *c);
		else putchar(*c);
	}
	putchar('"');
}

static imago_ep_t *open_peer(imago_t *im, uint64_t node, uint64_t peer)
{
	struct imago_ep_opts eo = {.local_node = node};
	imago_ep_t *ep = NULL;
	int rc = imago_open(im, "imago-cp", peer, &eo, &ep);
	if (rc < 0) fprintf(stderr, "imago-cp: endpoint to node %llu: %s\n", (unsigned long long)peer, strerror(-rc));
	return ep;
}

/* Send one message, waiting out back-pressure (bounded by the stall timeout). */
static int send_one(imago_ep_t *ep, const void *p, uint32_t len, double timeout_s)
{
	uint64_t end = ex_deadline(timeout_s);
	int rc;
	while ((rc = imago_send(ep, p, len, 0)) == -EAGAIN && !ex_stop && ex_now_ns() < end)
		ex_poll();
	return rc == -EAGAIN ? -ETIMEDOUT : rc;
}

/* ---- the sender ---- */

struct sender {
	imago_t *im;
	imago_ep_t *g;
	uint64_t node;
	struct member m[kMaxMembers];
	unsigned n;
};

/* Events of our stream (joins, expiries), and the members' DONE on their endpoints. */
static void sender_poll(struct sender *s, uint64_t sum, uint64_t size)
{
	struct imago_msg d[16];
	ex_poll();
	int k = imago_recv_burst(s->g, d, 16);
	for (int i = 0; i < k; ++i) {
		struct imago_group_event e;
		if (!(d[i].flags & IMAGO_MSG_F_EVENT)) continue;
		memcpy(&e, imago_msg_data(&d[i]), sizeof e);
		if (e.kind == IMAGO_GROUP_JOINED && s->n < kMaxMembers) {
			s->m[s->n] = (struct member){e.member, open_peer(s->im, s->node, e.member), 0};
			printf("member %llu joined\n", (unsigned long long)e.member), s->n++;
		}
		for (unsigned j = 0; j < s->n && e.kind == IMAGO_GROUP_EXPIRED; ++j)
			if (s->m[j].id == e.member && s->m[j].state == 0)
				s->m[j].state = 3, printf("member %llu expired\n", (unsigned long long)e.member);
	}
	if (k > 0) imago_release(s->g, d, (unsigned)k);
	for (unsigned j = 0; j < s->n; ++j) {
		if (s->m[j].ep == NULL || imago_recv_burst(s->m[j].ep, d, 1) != 1) continue;
		struct cp_ctl c = {0};
		memcpy(&c, imago_msg_data(&d[0]), d[0].len < sizeof c ? d[0].len : sizeof c);
		if (c.type == kDone && s->m[j].state == 0) {
			const int ok = c.sum == sum && c.size == size;
			s->m[j].state = ok ? 1 : 2;
			printf("member %llu done: %s\n", (unsigned long long)s->m[j].id, ok ? "checksum ok" : "CHECKSUM MISMATCH");
		} else if (c.type == kFailed && s->m[j].state == 0) {
			c.name[kNameMax] = 0;
			s->m[j].state = 4;
			printf("member %llu failed: %s\n", (unsigned long long)s->m[j].id, c.name);
		}
		imago_release(s->m[j].ep, d, 1);
	}
	fflush(stdout);
}

/* The file read (@p read bytes through @p f) is not the one that was opened (@p at_open):
 * it shrank, grew or was written meanwhile. */
static int changed(FILE *f, const struct stat *at_open, uint64_t read)
{
	struct stat now;
	return fstat(fileno(f), &now) != 0 || (uint64_t)at_open->st_size != read || now.st_size != at_open->st_size ||
	       now.st_mtim.tv_sec != at_open->st_mtim.tv_sec || now.st_mtim.tv_nsec != at_open->st_mtim.tv_nsec;
}

static int run_send(imago_t *im, struct cp_opts *o, uint64_t node)
{
	const struct stat st = o->at_open; /* opened and checked before the node started (parse()) */
	FILE *f = o->f;
	const char *base = strrchr(o->file, '/');
	base = base ? base + 1 : o->file;
	struct sender s = {.im = im, .node = node};
	struct imago_group_opts go = {.local_node = node, .flags = IMAGO_GROUP_SEND};
	int rc = imago_group_open(im, o->group, &go, &s.g);
	if (rc < 0) return fclose(f), fprintf(stderr, "imago-cp: group %u: %s\n", o->group, strerror(-rc)), rc;
	if (ex_check_size(s.g, "--chunk", o->chunk + 1, "imago-cp") < 0) return fclose(f), -EMSGSIZE; /* a DATA message */
	printf("READY group %u node %llu send %s\n", o->group, (unsigned long long)node, o->file), fflush(stdout);
	uint64_t until = ex_deadline(o->timeout_s);
	while (s.n < o->members && !ex_stop && ex_now_ns() < until) sender_poll(&s, 0, 0);
	uint8_t *buf = malloc(o->chunk + 1);
	if (buf == NULL) return fclose(f), fprintf(stderr, "imago-cp: no memory for a chunk\n"), -ENOMEM;
	struct cp_ctl c = {.type = kBof};
	snprintf(c.name, sizeof c.name, "%s", base);
	uint64_t sum = 14695981039346656037ull, t0 = ex_now_ns();
	if (s.n < o->members)
		fprintf(stderr, "imago-cp: %u of %u members joined within --timeout\n", s.n, o->members);
	rc = s.n < o->members ? -ETIMEDOUT : send_one(s.g, &c, sizeof c, o->timeout_s);
	size_t got;
	buf[0] = kData;
	while (rc == 0 && !ex_stop && (got = fread(buf + 1, 1, o->chunk, f)) > 0) {
		sum = fnv64(sum, buf + 1, got), c.size += got;
		rc = send_one(s.g, buf, (uint32_t)got + 1, o->timeout_s);
		sender_poll(&s, 0, 0);
	}
	if (rc == 0 && ex_stop) rc = -EINTR;
	c.type = kEof, c.sum = sum;
	const uint64_t sent = c.size;
	const int stale = rc == 0 && changed(f, &st, c.size);
	if (stale) {  /* what was read is no one version of the file: no member may keep it */
		fprintf(stderr, "imago-cp: %s changed while it was sent\n", o->file);
		c.size = UINT64_MAX;
	}
	if (rc == 0) rc = send_one(s.g, &c, sizeof c, o->timeout_s);
	/* Until every member said done or was expired. */
	unsigned open = s.n;
	until = ex_deadline(o->timeout_s);
	while (rc == 0 && open > 0 && !ex_stop && ex_now_ns() < until) {
		sender_poll(&s, sum, c.size);
		open = 0;
		for (unsigned j = 0; j < s.n; ++j) open += s.m[j].state == 0;
	}
	double secs = (double)(ex_now_ns() - t0) / 1e9;
	unsigned ok = 0, bad = 0, expired = 0;
	for (unsigned j = 0; j < s.n; ++j)
		if (s.m[j].state == 0) printf("member %llu unfinished\n", (unsigned long long)s.m[j].id);
	printf("RESULT {\"mode\":\"cp\",\"role\":\"send\",\"bytes\":%llu,\"seconds\":%.3f,\"mib_per_s\":%.2f,\"members\":[",
	       (unsigned long long)sent, secs, (double)sent / 1048576.0 / secs);
	for (unsigned j = 0; j < s.n; ++j) {
		static const char *const st[] = {"unfinished", "done", "mismatch", "expired", "failed"};
		printf("%s{\"node\":%llu,\"state\":\"%s\"}", j ? "," : "", (unsigned long long)s.m[j].id, st[s.m[j].state]);
		ok += s.m[j].state == 1, expired += s.m[j].state == 3, bad += s.m[j].state != 1 && s.m[j].state != 3;
	}
	printf("],\"done\":%u,\"expired\":%u,\"failed\":%u}\n", ok, expired, bad);
	free(buf), fclose(f);
	return rc < 0 ? rc : stale ? -ESTALE : bad ? -EIO : 0;
}

/* ---- a receiver ---- */

/* Our DONE on @p back is confirmed by the sender's node: the engine took it, and a node
 * snapshot published since (they are 1 ms apart: 5 ms after) has nothing in flight; an
 * older snapshot's 0 said nothing of it (the receiver left, and a DONE lost once was never
 * sent again: 3 of 6 runs at 30 % loss). Gives up at @p end; *@p taken is when the engine
 * took it (0: not yet). */
static int done_confirmed(imago_t *im, imago_ep_t *back, uint64_t end, uint64_t *taken)
{
	struct imago_ep_stats st;
	struct imago_node_stats ns;
	const uint64_t now = ex_now_ns();
	if (now >= end) return 1;
	if (imago_stats(back, &st) < 0 || st.msgs_sent < 1) return 0;
	if (*taken == 0) *taken = now;
	return now - *taken >= 5000000 && imago_node_stats_get(im, 0, &ns) == 0 && ns.msgs_in_flight == 0;
}

/* The file is written under a name of its own in @p dir (into @p part), and takes its name
 * only once whole and checked: a receiver whose --out holds the sender's file (one machine)
 * does not truncate it under the sender, a link at the name is replaced, not followed, and a
 * transfer that fails leaves nothing under the name. */
static FILE *open_part(const char *dir, const char *name, uint64_t node, char *part, size_t cap)
{
	snprintf(part, cap, "%s/.%s.imago-cp-%llu", dir, name, (unsigned long long)node);
	unlink(part); /* a crashed run's */
	int fd = open(part, O_WRONLY | O_CREAT | O_EXCL, 0644);
	return fd < 0 ? NULL : fdopen(fd, "wb");
}

/* Close the part written (@p f, none: nothing written) and give it its @p path when @p fate
 * is done, else remove it. @return the fate. */
static const char *finish_part(FILE *f, const char *part, const char *path, const char *fate)
{
	if (f == NULL) return fate;
	const int done = !strcmp(fate, "done");
	if (fclose(f) != 0 && done) fate = "cannot write";
	if (!strcmp(fate, "done") && rename(part, path) != 0) fate = "cannot write";
	if (strcmp(fate, "done")) unlink(part);
	return fate;
}

static int run_recv(imago_t *im, struct cp_opts *o, uint64_t node)
{
	imago_ep_t *g = NULL, *back = NULL;
	struct imago_group_opts go = {.local_node = node, .flags = IMAGO_GROUP_RECV};
	int rc = imago_group_open(im, o->group, &go, &g);
	if (rc < 0) return fprintf(stderr, "imago-cp: group %u: %s\n", o->group, strerror(-rc)), rc;
	printf("READY group %u node %llu recv into %s\n", o->group, (unsigned long long)node, o->out), fflush(stdout);
	FILE *f = NULL;
	char path[4096] = "", part[4096] = "";
	uint64_t size = 0, sum = 14695981039346656037ull, last = ex_now_ns(), src = 0;
	struct cp_ctl eof = {0};
	const char *fate = NULL;
	while (fate == NULL && !ex_stop && (o->timeout_s == 0 || (double)(ex_now_ns() - last) < o->timeout_s * 1e9)) {
		struct imago_msg d[32];
		ex_poll();
		int k = imago_recv_burst(g, d, 32);
		for (int i = 0; i < k && fate == NULL; ++i) {
			const uint8_t *p = imago_msg_data(&d[i]);
			last = ex_now_ns();
			if (d[i].flags & IMAGO_MSG_F_EVENT) {
				struct imago_group_event e;
				memcpy(&e, p, sizeof e);
				if (e.kind == IMAGO_GROUP_STARTED && back == NULL) src = e.source, back = open_peer(im, node, e.source);
				if (e.kind == IMAGO_GROUP_ENDED && e.source == src && eof.type != kEof)
					fate = e.reason == IMAGO_GROUP_END_DROPPED ? "expired" : "source gone";
				continue;
			}
			if (d[i].len == 0 || d[i].src != src) continue;
			if (p[0] == kBof && d[i].len == sizeof(struct cp_ctl) && f == NULL) {
				struct cp_ctl c;
				memcpy(&c, p, sizeof c);
				c.name[kNameMax] = 0;
				if (strchr(c.name, '/') != NULL || c.name[0] == '.' || c.name[0] == 0) { fate = "bad name"; break; }
				snprintf(path, sizeof path, "%s/%s", o->out, c.name);
				if ((f = open_part(o->out, c.name, node, part, sizeof part)) == NULL) { fate = "cannot write"; break; }
			} else if ((p[0] == kData || p[0] == kEof) && f == NULL) {
				fate = "joined late"; /* the file goes out once, from its start: we missed it */
			} else if (p[0] == kData) {
				if (fwrite(p + 1, 1, d[i].len - 1, f) != d[i].len - 1) { fate = "cannot write"; break; }
				size += d[i].len - 1, sum = fnv64(sum, p + 1, d[i].len - 1);
			} else if (p[0] == kEof && d[i].len == sizeof eof && f != NULL) {
				memcpy(&eof, p, sizeof eof);
				fate = eof.size == size && eof.sum == sum ? "done" : "mismatch";
			}
		}
		if (k > 0) imago_release(g, d, (unsigned)k);
	}
	if (fate == NULL) fate = ex_stop ? "stopped" : "timed out";
	fate = finish_part(f, part, path, fate);
	/* The sender hears what became of its file here: our checksum, or why we have none. */
	struct cp_ctl done = {.type = kDone, .size = size, .sum = sum};
	const int judged = !strcmp(fate, "done") || !strcmp(fate, "mismatch");
	if (!judged) done.type = kFailed, snprintf(done.name, sizeof done.name, "%s%s%s", fate, path[0] ? ": " : "", path);
	const int tell = back != NULL && (judged || !strcmp(fate, "cannot write") || !strcmp(fate, "bad name") ||
	                                  !strcmp(fate, "stopped") || !strcmp(fate, "joined late"));
	if (tell) rc = send_one(back, &done, sizeof done, o->timeout_s);
	/* The DONE must reach the sender before we detach: wait until the engine took it and the
	 * sender's node confirmed everything (nothing to wait for when we told nothing: the
	 * source is gone, or dropped us). */
	const uint64_t end = ex_deadline(o->timeout_s);
	uint64_t taken = 0; /* when the engine took our DONE */
	while (tell && rc == 0 && !ex_stop && !done_confirmed(im, back, end, &taken)) ex_poll();
	printf("file %s: %s\n", path, fate);
	printf("RESULT {\"mode\":\"cp\",\"role\":\"recv\",\"node\":%llu,\"source\":%llu,\"file\":",
	       (unsigned long long)node, (unsigned long long)src);
	print_json_string(path);
	printf(",\"bytes\":%llu,\"state\":\"%s\"}\n", (unsigned long long)size, fate);
	return strcmp(fate, "done") ? -EIO : rc;
}

int main(int argc, char **argv)
{
	struct cp_opts o = {.group = 7, .members = 1, .chunk = 8192, .timeout_s = 30};
	int rc = parse(argc, argv, &o);
	if (rc) return rc == 1 ? 0 : rc;
	imago_t *im;
	const int attached = ex_attach(&o.ex, argv[0], &im);
	if (attached < 0) {
		if (o.f) fclose(o.f);
		return ex_attach_status(&o.ex, attached);
	}
	uint64_t node = o.node ? o.node : imago_node_id(im, 0);
	rc = o.file ? run_send(im, &o, node) : run_recv(im, &o, node);
	if (ex_output_lost(argv[0])) rc = -EIO;
	imago_detach(im);
	return rc < 0 ? 1 : 0;
}
