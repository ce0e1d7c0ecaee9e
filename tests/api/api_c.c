/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The public headers compile as C11 (not only as C++), and the C calls work: one message from
 * endpoint @p a to endpoint @p b, received and released from C. Called by api_test.cc.
 */
#include <errno.h>
#include <string.h>

#include "api/imago.h"

int imago_c_roundtrip(imago_ep_t *a, imago_ep_t *b, int max_polls);

int imago_c_roundtrip(imago_ep_t *a, imago_ep_t *b, int max_polls)
{
	static const char text[] = "hello from C";
	struct imago_msg m[4];
	struct imago_iov iov = {.data = text, .len = sizeof text};
	int rc = imago_send_burst(a, &iov, 1, IMAGO_FASTPATH);
	if (rc != 1)
		return rc < 0 ? rc : -EAGAIN;
	for (int i = 0; i < max_polls; i++) {
		if (imago_wait(b, 1000) < 0)
			return -ENOTCONN;
		int n = imago_recv_burst(b, m, 4);
		if (n < 0)
			return n;
		if (n == 0)
			continue;
		int ok = n == 1 && m[0].len == sizeof text && memcmp(imago_msg_data(&m[0]), text, sizeof text) == 0 &&
			 m[0].src == imago_ep_peer(b);
		imago_release(b, m, (unsigned)n);
		return ok ? 0 : -EBADMSG;
	}
	return -ETIMEDOUT;
}
