/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Naming the process that holds a port, so that a listener that cannot
 * open says who is in its way. Linux only: the listening socket's inode
 * from /proc/net/tcp and tcp6 (state 0A is LISTEN), then the process
 * with a descriptor on "socket:[INODE]". Bounded: one line of each table
 * at a time, and the scan stops at the first match.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/lib/port_holder.h"

/* The inode of a socket listening on 'port' in 'table', or 0. */
static unsigned long
listening_inode(const char *table, int port)
{
    FILE *fp = fopen(table, "r");
    char line[512];
    unsigned long inode = 0;

    if (fp == NULL)
        return 0;
    if (fgets(line, sizeof(line), fp) == NULL) {   /* the header */
        fclose(fp);
        return 0;
    }
    while (inode == 0 && fgets(line, sizeof(line), fp) != NULL) {
        char local[64], remote[64];
        unsigned st, lport;
        unsigned long ino;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %*s %*s %lu", local,
                   remote, &st, &ino) != 4)
            continue;
        const char *colon = strrchr(local, ':');
        if (colon == NULL || sscanf(colon + 1, "%x", &lport) != 1)
            continue;
        if (st == 0x0A && (int)lport == port)
            inode = ino;
    }
    fclose(fp);
    return inode;
}

/* The pid with a descriptor on socket 'inode', or 0. */
static long
inode_pid(unsigned long inode)
{
    char want[64], path[300], target[64];
    DIR *proc = opendir("/proc");
    struct dirent *p;
    long found = 0;

    if (proc == NULL)
        return 0;
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    while (found == 0 && (p = readdir(proc)) != NULL) {
        char *end;
        long pid = strtol(p->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/fd", pid);
        DIR *fds = opendir(path);
        if (fds == NULL)
            continue;
        struct dirent *f;
        while (found == 0 && (f = readdir(fds)) != NULL) {
            snprintf(path, sizeof(path), "/proc/%ld/fd/%s", pid, f->d_name);
            ssize_t n = readlink(path, target, sizeof(target) - 1);
            if (n <= 0)
                continue;
            target[n] = '\0';
            if (strcmp(target, want) == 0)
                found = pid;
        }
        closedir(fds);
    }
    closedir(proc);
    return found;
}

bool
port_holder(int port, char *out, size_t len)
{
    unsigned long inode = listening_inode("/proc/net/tcp6", port);
    if (inode == 0)
        inode = listening_inode("/proc/net/tcp", port);
    if (inode == 0) {
        snprintf(out, len, "no process listens on it");
        return false;
    }
    long pid = inode_pid(inode);
    if (pid == 0) {
        snprintf(out, len, "a process this user cannot see");
        return false;
    }
    char path[64], name[64] = "";
    snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
    FILE *fp = fopen(path, "r");
    if (fp != NULL) {
        if (fgets(name, sizeof(name), fp) != NULL)
            name[strcspn(name, "\n")] = '\0';
        fclose(fp);
    }
    snprintf(out, len, "%s (pid %ld)", name[0] ? name : "?", pid);
    return true;
}
