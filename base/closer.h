/*
 * SPDX-License-Identifier: Apache-2.0
 * Sockets closed off the event loop: closer_close hands a descriptor to
 * a thread that closes it, or closes it itself when that thread is not
 * running or its queue (16,384 descriptors) is full.
 */
#ifndef ROOST_BASE_CLOSER_H
#define ROOST_BASE_CLOSER_H

/* Start the thread: 0, or -1 (descriptors are then closed in place). */
int closer_start(void);
/* Close what is queued and end the thread. */
void closer_stop(void);
/* Close 'fd', now or soon; it must no longer be in any event. */
void closer_close(int fd);

#endif
