/*
 * SPDX-License-Identifier: Apache-2.0
 * Resource alarms. Memory is checked on every publish (cheap: the message
 * byte counter plus the last buffer total) and recomputed every 100 ms
 * with the connections' buffers; disk every second with statvfs().
 */
#include "broker/core/alarm.h"
#include "broker/core/hooks.h"

#include <event2/event.h>
#include <inttypes.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "broker/core/broker.h"
#include "broker/core/inbuf.h"
#include "broker/core/msg.h"
#include "broker/core/queue.h"
#include "broker/core/store.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

static uint64_t mem_limit;
static uint64_t buffers;        /* connection output, at the last tick */
static uint64_t http_bytes;     /* HTTP requests arriving */
static bool mem_alarm, disk_alarm;
static bool paging;
static uint64_t paging_limit;
static struct event *tick;
static unsigned ticks;

uint64_t
alarm_memory_limit(void)
{
    return mem_limit;
}

uint64_t
alarm_memory_used(void)
{
    /* Input blocks (which hold lent bodies) are counted as they are
     * allocated, like messages, and so are the queues' entries; output
     * only at each tick. */
    return msg_bytes_in_use() + inbuf_bytes_in_use() + queue_ring_bytes() +
           buffers + http_bytes;
}

void
alarm_http_bytes(int64_t delta)
{
    http_bytes = (uint64_t)((int64_t)http_bytes + delta);
}

bool
alarm_paging(void)
{
    return paging;
}

/* Paging starts above the paging ratio of the limit and stops below
 * half of that: paging itself frees memory at once, and the windows
 * coming back take some again, so a narrower band would flap. */
static void
check_paging(uint64_t used)
{
    bool p = paging ? used > paging_limit / 2 : used > paging_limit;
    if (p == paging)
        return;
    paging = p;
    log_info("memory use %" PRIu64 " bytes is %s the paging threshold %"
             PRIu64 " (vm_memory_high_watermark_paging_ratio): queues %s",
             used, p ? "above" : "back below", paging_limit,
             p ? "page more messages out" : "keep their windows in memory");
    queue_pager_kick(true);
}

bool
alarm_is_set(void)
{
    return mem_alarm || disk_alarm;
}

bool
alarm_memory_set(void)
{
    return mem_alarm;
}

bool
alarm_disk_set(void)
{
    return disk_alarm;
}

const char *
alarm_reason(void)
{
    return mem_alarm ? "low on memory" : "low on disk";
}

static void
set_alarms(bool mem, bool disk)
{
    bool was = alarm_is_set();

    if (mem != mem_alarm) {
        if (mem)
            log_warnx("memory resource limit alarm set: %" PRIu64 " bytes used,"
                      " %" PRIu64 " allowed; publishers will be blocked",
                      alarm_memory_used(), mem_limit);
        else
            log_info("memory resource limit alarm cleared: %" PRIu64
                     " bytes used, %" PRIu64 " allowed", alarm_memory_used(),
                     mem_limit);
        mem_alarm = mem;
    }
    if (disk != disk_alarm) {
        if (disk && store_is_failed())
            log_warnx("disk resource limit alarm set on %s: the store "
                      "cannot write (%s); publishers will be blocked",
                      broker.cfg.data_dir, store_failure());
        else if (disk)
            log_warnx("disk resource limit alarm set on %s: free space below "
                      "%" PRId64 " bytes; publishers will be blocked",
                      broker.cfg.data_dir, broker.cfg.disk_free_limit);
        else
            log_info("disk resource limit alarm cleared on %s",
                     broker.cfg.data_dir);
        disk_alarm = disk;
    }
    if (was && !alarm_is_set())
        session_hooks.unblock_publishers();
}

void
alarm_check_memory(void)
{
    uint64_t used = alarm_memory_used();
    bool over = used > mem_limit;
    if (used > paging_limit && !paging)
        check_paging(used);
    if (over != mem_alarm)
        set_alarms(over, disk_alarm);
}

static uint64_t disk_free;

static bool
disk_low(void)
{
    struct statvfs sv;
    if (statvfs(broker.cfg.data_dir, &sv) == 0)
        disk_free = (uint64_t)sv.f_bavail * sv.f_frsize;
    /* The store failing to write is a disk that takes nothing. */
    if (store_is_failed())
        return true;
    if (broker.cfg.disk_free_limit == 0)
        return false;
    return disk_free < (uint64_t)broker.cfg.disk_free_limit;
}

uint64_t
alarm_disk_free(void)
{
    return disk_free;
}

void
alarm_memory_kinds(struct mem_kinds *out)
{
    out->messages = msg_bytes_in_use();
    out->input_blocks = inbuf_bytes_in_use();
    out->queue_entries = queue_ring_bytes();
    out->output_buffers = buffers;
    out->http_requests = http_bytes;
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    buffers = session_hooks.buffer_bytes();
    bool disk = disk_alarm;
    if (++ticks % 10 == 0) {
        disk = disk_low();
        /* Messages kept for over a second give back sparse input blocks. */
        inbuf_compact(1000);
        store_trim_memory();
    }
    if (store_is_failed())
        disk = true;
    check_paging(alarm_memory_used());
    set_alarms(alarm_memory_used() > mem_limit, disk);
}

/* The limits from the configuration, logged. */
static void
set_limits(void)
{
    if (broker.cfg.mem_high_watermark_absolute > 0) {
        mem_limit = (uint64_t)broker.cfg.mem_high_watermark_absolute;
    } else {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        double ram = pages > 0 && size > 0 ? (double)pages * (double)size
                                           : 1024.0 * 1024 * 1024;
        mem_limit = (uint64_t)(ram * broker.cfg.mem_high_watermark_relative);
    }
    paging_limit = (uint64_t)((double)mem_limit * broker.cfg.mem_paging_ratio);
    log_info("memory high watermark %" PRIu64 " bytes (paging above %" PRIu64
             "); disk free limit %" PRId64 " bytes", mem_limit, paging_limit,
             broker.cfg.disk_free_limit);
}

void
alarm_init(void)
{
    set_limits();
    disk_alarm = false;
    set_alarms(false, disk_low());
    tick = event_new(broker.base, -1, EV_PERSIST, tick_cb, NULL);
    struct timeval tv = { 0, 100 * 1000 };
    event_add(tick, &tv);
}

void
alarm_reconfigure(void)
{
    set_limits();
    check_paging(alarm_memory_used());
    set_alarms(alarm_memory_used() > mem_limit, disk_low());
}

void
alarm_shutdown(void)
{
    if (tick)
        event_free(tick);
    tick = NULL;
}
