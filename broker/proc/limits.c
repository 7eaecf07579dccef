/*
 * SPDX-License-Identifier: Apache-2.0
 * The descriptor budget (limits.h).
 */
#include "broker/proc/limits.h"

#include <sys/resource.h>

#include "broker/lib/config.h"
#include "broker/lib/log.h"
#include "broker/session/conn.h"

static uint64_t
nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    return rl.rlim_cur;
}

uint64_t
limits_raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            log_info("open file limit raised from %llu to %llu",
                     (unsigned long long)was,
                     (unsigned long long)rl.rlim_max);
        else
            log_warn("cannot raise the open file limit from %llu to %llu",
                     (unsigned long long)was,
                     (unsigned long long)rl.rlim_max);
    }
    return nofile();
}

void
limits_fit_connections(struct config *cfg, bool warn)
{
    uint64_t limit = nofile();

    if (limit == UINT64_MAX)
        return;
    uint64_t reserve = LIMITS_FD_RESERVE(limit);
    int64_t fits = (int64_t)limit - (int64_t)reserve - CONN_HANDSHAKE_SLACK;
    if (fits < 1)
        fits = 1;
    if (cfg->connection_max <= fits)
        return;
    if (warn)
        log_warnx("connection_max %lld with %d sockets in handshake and %llu "
                  "descriptors in reserve exceeds the open file limit of "
                  "%llu: "
                  "connection_max lowered to %lld (raise LimitNOFILE or "
                  "ulimit -n)", (long long)cfg->connection_max,
                  CONN_HANDSHAKE_SLACK, (unsigned long long)reserve,
                  (unsigned long long)limit, (long long)fits);
    cfg->connection_max = fits;
}
