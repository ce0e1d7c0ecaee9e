/* SPDX-License-Identifier: BSD-3-Clause */
/* What an application may do at the ends of its life, each in a process of its own (EAL
 * starts once per process), written against imago.h alone:
 *   exit_test return     attach (embedded default), open, send, and return from main()
 *                        without imago_detach(): the library detaches; exit code 0, no crash
 *   exit_test secondary  attach as a secondary of an imagod that is not there: -EIO, found
 *                        before EAL starts, so the process may attach again: the same -EIO
 *                        once more, then embedded: 0 (EAL started only then)
 *   exit_test small      attach with --max-message 1024 (the least), smaller than a frame's
 *                        payload: it attaches, and endpoints take 1024 bytes, not 1025 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "imago.h"

static int leave_attached(void) {
	imago_t *im = NULL;
	imago_ep_t *ep = NULL;
	if (imago_attach_embedded(0, NULL, &im) != 0 || imago_open(im, "exit", 2, NULL, &ep) != 0) {
		fprintf(stderr, "exit_test: attach or open failed\n");
		return 1;
	}
	(void)imago_send(ep, "bye", 3, 0); /* in flight, or queued: either way, then exit */
	return 0; /* no imago_detach(): the library's exit handler does it */
}

static int failed_secondary(void) {
	char prefix[64];
	snprintf(prefix, sizeof prefix, "imago-nobody-%d", (int)getpid());
	imago_t *im = NULL;
	const int first = imago_attach_secondary(prefix, &im);
	const int second = imago_attach_secondary(prefix, &im);
	const int embedded = imago_attach_embedded(0, NULL, &im);
	printf("exit_test: first %d, second %d, embedded %d\n", first, second, embedded);
	const int detached = embedded == 0 ? imago_detach(im) : -1;
	return first == -EIO && second == -EIO && embedded == 0 && detached == 0 ? 0 : 1;
}

static int small_max(void) {
	char prog[] = "exit_test", pair[] = "--pair", opt[] = "--max-message", val[] = "1024";
	char *argv[] = {prog, pair, opt, val};
	imago_t *im = NULL;
	imago_ep_t *ep = NULL;
	static char msg[1025];
	const int att = imago_attach_embedded(4, argv, &im);
	const int op = att == 0 ? imago_open(im, "small", 2, NULL, &ep) : -1;
	const uint32_t max = op == 0 ? imago_max_message(ep) : 0;
	const int fits = op == 0 ? imago_send(ep, msg, 1024, 0) : -1;
	const int over = op == 0 ? imago_send(ep, msg, 1025, 0) : -1;
	printf("exit_test: attach %d, open %d, max %u, 1024: %d, 1025: %d\n", att, op, max, fits, over);
	const int detached = att == 0 ? imago_detach(im) : -1;
	return att == 0 && op == 0 && max == 1024 && fits == 0 && over == -EMSGSIZE && detached == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "return") == 0) return leave_attached();
	if (argc == 2 && strcmp(argv[1], "secondary") == 0) return failed_secondary();
	if (argc == 2 && strcmp(argv[1], "small") == 0) return small_max();
	fprintf(stderr, "usage: exit_test return|secondary|small\n");
	return 2;
}
