/*
 * The AMQP listener: one socket on the configured address and port (all
 * IPv4 and IPv6 addresses by default), handing accepted sockets to
 * conn_accept().
 */
#ifndef ROOST_BROKER_LISTENER_H
#define ROOST_BROKER_LISTENER_H

/* Start listening; returns the bound port, or -1 (logged). */
int listener_start(const char *bind_addr, int port, int backlog);

/* Stop accepting (shutdown). */
void listener_stop(void);

#endif
