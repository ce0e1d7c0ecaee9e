/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * imago-reqresp: a client sends --count requests one at a time and waits for each response;
 * the server echoes every request. The client checks each response and prints the round-trip
 * percentiles in RESULT. `both` runs the two in this process (embedded by default); `client`
 * and `server` attach to an imagod (--secondary PREFIX) as two applications.
 */
#include "example.h"

static const char *const roles[] = {"client", "server", "both", NULL};
static const char help[] =
	"Usage: %s [client|server|both: both] [options] [-- imagod options of an embedded node]\n"
	"  (an option's value follows it, or is joined to it by '=': --timeout 5, --timeout=5)\n"
	"  (embedded with -- ... --run-to-completion, this thread polls the node too)\n"
	"  --secondary PREFIX  attach to the imagod started with --file-prefix PREFIX [embedded]\n"
	"  --node ID           this process's node, 1..4294967295 [client 1, server 2]\n"
	"  --peer ID           its peer's node, 1..4294967295 [the other node, or the only --peer of a\n"
	"                      one-node embedded command line]\n"
	"  --name NAME         endpoint name [reqresp]\n"
	"  --count N           requests, 1..18446744073709551615 [10000]\n"
	"  --size B | A-B      request bytes, 16..4294967295, or spread over A..B [64]\n"
	"  --wait              sleep in imago_wait() between messages instead of polling\n"
	"  --timeout S         a request unanswered for S seconds is an error, 0..1000000, 0: wait\n"
	"                      forever [5]\n"
	"The server exits when its client is done (or on SIGINT); it echoes what comes, so --count,\n"
	"--size and --timeout are the client's (and both's) only, refused for server; both runs nodes\n"
	"1 and 2, so --node and --peer are refused for it; an option not listed here is refused as\n"
	"unknown (exit 2). RESULT's rtt_us percentiles come from a\n"
	"histogram of fixed size (within 1.6 %%; max exact), whatever --count.\n";
/* Options the server ignores, and both (its nodes are 1 and 2): refused there (ex_parse()). */
static const char *const only[] = {"--count", "client, both", "--size", "client, both", "--timeout", "client, both",
				   "--node", "client, server", "--peer", "client, server", NULL};

/* Echo every request waiting on @p ep. @return requests echoed, -1 after the last, or -errno. */
static int serve(imago_ep_t *ep, uint64_t *served)
{
	struct imago_msg m[32];
	ex_poll();
	int n = imago_recv_burst(ep, m, 32), rc = n, end = 0;
	for (int i = 0; i < n && rc >= 0; ++i) {
		uint64_t seq = 0;
		if (ex_check(imago_msg_data(&m[i]), m[i].len, &seq) == 0 && seq == EX_END) {
			end = 1;
			break;
		}
		while ((rc = imago_send(ep, imago_msg_data(&m[i]), m[i].len, IMAGO_FASTPATH)) == -EAGAIN && !ex_stop)
			ex_poll();
		*served += rc == 0;
	}
	if (n > 0) imago_release(ep, m, (unsigned)n);
	return rc < 0 ? rc : end ? -1 : n;
}

/* Round trips, ns: a histogram of fixed size, not a sample each (--count may be 2^64 - 1). */
static struct ex_hist rtt;

static double rtt_us(double q) { return (double)ex_hist_at(&rtt, q) / 1e3; }

int main(int argc, char **argv)
{
	struct ex_opts o = {.name = "reqresp", .count = 10000, .size_min = 64, .size_max = 64, .timeout_s = 5, .only = only,
			    .own = " --secondary --node --peer --name --count --size --wait --timeout "};
	int rc = ex_parse(argc, argv, &o, roles, help);
	if (rc) return rc == 1 ? 0 : rc;
	int do_cli = strcmp(o.role, "server") != 0, do_srv = strcmp(o.role, "client") != 0;
	imago_t *im;
	imago_ep_t *cli = NULL, *srv = NULL;
	uint64_t n = 0, served = 0, bytes = 0;
	uint64_t lost = 0, dup = 0, reord = 0, bad = 0;
	char *req = NULL;
	const int attached = ex_attach(&o, argv[0], &im);
	if (attached < 0) return ex_attach_status(&o, attached);
	rc = 1;
	uint64_t cli_node = do_cli && o.node ? o.node : 1, srv_node = do_srv && o.node ? o.node : 2;
	if (do_srv && !(srv = ex_open(im, &o, srv_node, do_cli ? cli_node : o.peer, argv[0]))) goto out;
	if (do_cli && !(cli = ex_open(im, &o, cli_node, do_srv ? srv_node : o.peer, argv[0]))) goto out;
	if (do_cli && ex_check_size(cli, "--size", o.size_max, argv[0]) < 0) goto out;
	if (do_cli && (req = malloc(o.size_max)) == NULL) { /* a message the endpoint takes: it fits */
		fprintf(stderr, "%s: no memory for a request of %u bytes\n", argv[0], o.size_max);
		goto out;
	}
	rc = 0;
	uint64_t t0 = ex_now_ns();
	int ready = 0;
	for (uint64_t seq = 0; do_cli && !ex_stop && rc >= 0 && seq <= o.count; ++seq) {
		uint32_t len = seq == o.count ? EX_HDR : ex_size(&o, seq);
		ex_fill(req, seq == o.count ? EX_END : seq, len);
		uint64_t start = ex_now_ns();
		uint64_t deadline = o.timeout_s > 0 ? start + (uint64_t)(o.timeout_s * 1e9) : UINT64_MAX;
		while ((rc = imago_send(cli, req, len, IMAGO_FASTPATH)) == -EAGAIN && !ex_stop && ex_now_ns() < deadline)
			if (srv) serve(srv, &served); /* it polls the node too */
			else ex_poll();
		if (rc == -EMSGSIZE) ex_check_size(cli, "--size", o.size_max, argv[0]); /* say which limit */
		if (seq == o.count) break; /* the last one, "no more", has no answer */
		for (int got = 0; rc >= 0 && !got && !ex_stop;) {
			struct imago_msg m;
			/* Ready, imago_max_message() is also what the server's node takes (its
			 * --max-message): a request above it would never be answered. */
			if (!ready && (ready = imago_peer_ready(cli)) == 1 && ex_check_size(cli, "--size", o.size_max, argv[0]) < 0)
				rc = -EMSGSIZE;
			if (!srv && !o.use_wait) ex_poll(); /* serve() and imago_wait() poll too */
			if (srv && (rc = serve(srv, &served)) == -1) rc = 0;
			if (rc >= 0 && o.use_wait && !srv) rc = imago_wait(cli, 100000);
			if (rc >= 0 && (rc = imago_recv_burst(cli, &m, 1)) == 1) {
				uint64_t r;
				if (ex_check(imago_msg_data(&m), m.len, &r) < 0 || (r == seq && m.len != len)) bad++;
				else if (r < seq) dup++;
				else if (r > seq) reord++;
				else ex_hist_add(&rtt, ex_now_ns() - start), n++, bytes += m.len, got = 1;
				imago_release(cli, &m, 1);
			}
			if (!got && rc >= 0 && ex_now_ns() > deadline) lost++, rc = -ETIMEDOUT;
		}
	}
	if (do_cli && rc >= 0 && !ex_stop) rc = ex_drain(cli, o.count + 1, o.timeout_s);
	uint64_t t1 = ex_now_ns();
	while (!do_cli && !ex_stop && (rc = serve(srv, &served)) >= 0)
		if (o.use_wait) imago_wait(srv, 100000);
	if (rc < -1) fprintf(stderr, "%s: %s\n", argv[0], strerror(-rc));
	if (ex_stop) printf("%s: stopped by a signal\n", o.role);
	printf("RESULT {\"mode\":\"reqresp\",\"role\":\"%s\",", o.role);
	if (do_srv) printf("\"requests_served\":%llu,", (unsigned long long)served);
	if (do_cli) {
		printf("\"msgs_sent\":%llu,\"msgs_delivered\":%llu,\"bytes_delivered\":%llu,",
		       (unsigned long long)(n + lost), (unsigned long long)n, (unsigned long long)bytes);
		ex_print_rate(n, bytes, t1 - t0);
		printf(",\"lost\":%llu,\"duplicated\":%llu,\"reordered\":%llu,\"corrupted\":%llu,"
		       "\"rtt_us\":{\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f}}\n",
		       (unsigned long long)lost, (unsigned long long)dup, (unsigned long long)reord, (unsigned long long)bad,
		       rtt_us(0.5), rtt_us(0.99), rtt_us(0.999), rtt_us(1.0));
	} else {
		printf("\"msgs_delivered\":%llu}\n", (unsigned long long)served);
	}
	rc = rc < -1 || lost || dup || reord || bad || ex_output_lost(argv[0]) ? 1 : 0;
out:
	imago_detach(im);
	free(req);
	return rc;
}
