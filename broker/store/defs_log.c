/*
 * SPDX-License-Identifier: Apache-2.0
 * Definition records: their encoding, their replay into the broker's
 * vhosts, and snapshots of everything kept. Replay is by name and
 * idempotent (an add replaces, a delete of what is absent is nothing),
 * so a log replayed over a snapshot that already holds it changes
 * nothing.
 */
#include "broker/store/store_defs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/exchange.h"
#include "broker/core/perm.h"
#include "broker/core/policy.h"
#include "broker/core/qargs.h"
#include "broker/core/queue.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

bool
store_keeps_exchange(const struct exchange *x)
{
    /* The predeclared ones are made by vhost_new (defs_quiet). */
    return x->durable && !x->is_default;
}

bool
store_keeps_queue(const struct queue *q)
{
    /* Exclusive queues end with their connection: they do not outlive a
     * restart. A durable auto-delete queue does, as in RabbitMQ 3.10
     * (checked against it), until its last consumer goes. */
    return q->durable && !q->exclusive;
}

static bool
is_predeclared(const struct exchange *x)
{
    /* Clients may not declare amq.* exchanges: these are vhost_new's. */
    return x->is_default || (x->name_len > 4 && memcmp(x->name, "amq.", 4) == 0);
}

bool
store_keeps_binding(const struct binding *b)
{
    return b->src->durable &&
           (b->q ? store_keeps_queue(b->q) : b->dest_x->durable);
}

static void
put_exchange(struct wbuf *out, const struct exchange *x)
{
    size_t at = rec_begin(out, D_EXCHANGE);
    wbuf_str(out, x->vh->name, strlen(x->vh->name));
    wbuf_str(out, x->name, x->name_len);
    wbuf_str(out, x->ops->type, strlen(x->ops->type));
    wbuf_u8(out, (uint8_t)((x->auto_delete ? 1 : 0) | (x->internal ? 2 : 0)));
    wbuf_str(out, x->args.ptr, x->args.len);
    /* Only a delayed exchange has a store id; older records end before
     * it (read as 0). */
    if (x->sid)
        wbuf_u32(out, x->sid);
    rec_end(out, at);
}

static void
put_queue(struct wbuf *out, uint8_t type, const struct queue *q)
{
    size_t at = rec_begin(out, type);
    wbuf_str(out, q->vh->name, strlen(q->vh->name));
    wbuf_str(out, q->name, q->name_len);
    wbuf_u32(out, q->sid);
    if (type == D_QUEUE) {
        wbuf_u8(out, q->auto_delete ? 1 : 0);
        wbuf_str(out, q->args.ptr, q->args.len);
    }
    rec_end(out, at);
}

static void
put_binding(struct wbuf *out, uint8_t type, const struct binding *b)
{
    size_t at = rec_begin(out, type);
    const char *dest = b->q ? b->q->name : b->dest_x->name;
    size_t dlen = b->q ? b->q->name_len : b->dest_x->name_len;
    wbuf_str(out, b->src->vh->name, strlen(b->src->vh->name));
    wbuf_str(out, b->src->name, b->src->name_len);
    wbuf_u8(out, b->q ? 1 : 0);
    wbuf_str(out, dest, dlen);
    wbuf_str(out, b->key, b->key_len);
    wbuf_str(out, b->args.ptr, b->args.len);
    rec_end(out, at);
}

static void
put_name(struct wbuf *out, uint8_t type, const char *vhost, const char *name,
         size_t len)
{
    size_t at = rec_begin(out, type);
    wbuf_str(out, vhost, strlen(vhost));
    if (name)
        wbuf_str(out, name, len);
    rec_end(out, at);
}

/* A user: name, hashing algorithm, salt and digest, tags. */
static void
put_user(struct wbuf *out, const struct user *u)
{
    size_t at = rec_begin(out, D_USER);
    wbuf_str(out, u->name, strlen(u->name));
    wbuf_u8(out, u->alg);
    wbuf_str(out, u->hash, u->hash_len);
    wbuf_str(out, u->tags, strlen(u->tags));
    rec_end(out, at);
}

/* A vhost: its name, then (optional, so that older records still read)
 * its description, tags and limits. */
static void
put_vhost(struct wbuf *out, const struct vhost *vh)
{
    size_t at = rec_begin(out, D_VHOST);
    wbuf_str(out, vh->name, strlen(vh->name));
    wbuf_str(out, vh->description, strlen(vh->description));
    wbuf_str(out, vh->tags, strlen(vh->tags));
    wbuf_u64(out, (uint64_t)vh->max_connections);
    wbuf_u64(out, (uint64_t)vh->max_queues);
    rec_end(out, at);
}

/* A user's permissions in a vhost: vhost, user, the three patterns. */
static void
put_perm(struct wbuf *out, const struct perm *p)
{
    size_t at = rec_begin(out, D_PERM);
    wbuf_str(out, p->vhost, strlen(p->vhost));
    wbuf_str(out, p->user, strlen(p->user));
    for (int k = 0; k < PERM_KINDS; k++)
        wbuf_str(out, p->pattern[k], strlen(p->pattern[k]));
    rec_end(out, at);
}

/* JSON text of 'v' (compact, keys sorted), into the record. */
static void
put_json(struct wbuf *out, const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (s == NULL)
        fatalx("store: a policy does not encode");
    wbuf_str(out, s, strlen(s));
    free(s);
}

/* A policy: vhost, name, kind (0 policy, 1 operator policy), then its
 * pattern, apply-to, priority and definition (JSON texts for the last
 * two). A deletion stops after the kind. */
static void
put_policy(struct wbuf *out, uint8_t type, const struct policy *p)
{
    size_t at = rec_begin(out, type);
    wbuf_str(out, p->vh->name, strlen(p->vh->name));
    wbuf_str(out, p->name, strlen(p->name));
    wbuf_u8(out, (uint8_t)p->kind);
    if (type == D_POLICY) {
        wbuf_str(out, p->pattern, strlen(p->pattern));
        const char *a = policy_apply_name[p->apply_to];
        wbuf_str(out, a, strlen(a));
        json_t *prio = policy_priority_json(p);
        put_json(out, prio);
        json_decref(prio);
        put_json(out, p->definition);
    }
    rec_end(out, at);
}

bool
defs_encode(struct wbuf *out, enum defs_event ev, const void *obj)
{
    const struct exchange *x = obj;
    const struct queue *q = obj;
    const struct binding *b = obj;
    const struct vhost *vh = obj;

    switch (ev) {
    case DEFS_VHOST_ADDED:
        put_vhost(out, vh);
        return true;
    case DEFS_VHOST_REMOVED:
        put_name(out, D_VHOST_DEL, vh->name, NULL, 0);
        return true;
    case DEFS_EXCHANGE_ADDED:
        if (!store_keeps_exchange(x))
            return false;
        put_exchange(out, x);
        return true;
    case DEFS_EXCHANGE_REMOVED:
        if (!store_keeps_exchange(x))
            return false;
        put_name(out, D_EXCHANGE_DEL, x->vh->name, x->name, x->name_len);
        return true;
    case DEFS_QUEUE_ADDED:
    case DEFS_QUEUE_REMOVED:
        if (q->sid == 0)
            return false;
        put_queue(out, ev == DEFS_QUEUE_ADDED ? D_QUEUE : D_QUEUE_DEL, q);
        return true;
    case DEFS_BINDING_ADDED:
    case DEFS_BINDING_REMOVED:
        if (!store_keeps_binding(b))
            return false;
        put_binding(out, ev == DEFS_BINDING_ADDED ? D_BIND : D_UNBIND, b);
        return true;
    case DEFS_USER_ADDED:
        put_user(out, obj);
        return true;
    case DEFS_USER_REMOVED:
        put_name(out, D_USER_DEL, ((const struct user *)obj)->name, NULL, 0);
        return true;
    case DEFS_PERM_ADDED:
        put_perm(out, obj);
        return true;
    case DEFS_PERM_REMOVED: {
        const struct perm *p = obj;
        put_name(out, D_PERM_DEL, p->vhost, p->user, strlen(p->user));
        return true;
    }
    case DEFS_POLICY_ADDED:
        put_policy(out, D_POLICY, obj);
        return true;
    case DEFS_POLICY_REMOVED:
        put_policy(out, D_POLICY_DEL, obj);
        return true;
    }
    return false;
}

void
defs_header(struct wbuf *out, uint64_t gen)
{
    size_t at = rec_begin(out, D_HEADER);
    wbuf_u32(out, STORE_FORMAT);
    wbuf_u64(out, gen);
    rec_end(out, at);
}

struct snap_perms {
    struct wbuf *out;
    uint64_t n;
};

static void
snap_perm(const struct perm *p, void *arg)
{
    struct snap_perms *sp = arg;
    put_perm(sp->out, p);
    sp->n++;
}

static void
snap_policy(const struct policy *p, void *arg)
{
    struct snap_perms *sp = arg;
    put_policy(sp->out, D_POLICY, p);
    sp->n++;
}

uint64_t
defs_snapshot(struct wbuf *out, uint64_t gen)
{
    struct snap_perms sp = { out, 0 };
    size_t pos = 0, xpos, qpos;
    struct hmap_slot *s, *xs, *qs;
    uint64_t n = 0;

    defs_header(out, gen);
    while ((s = hmap_next(&broker.users, &pos)) != NULL) {
        put_user(out, s->val);
        n++;
    }
    pos = 0;
    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL) {
        struct vhost *vh = s->val;
        put_vhost(out, vh);
        n++;
        /* Policies before the queues and exchanges: each of those is
         * matched once, when it is added, not again at every policy. */
        for (int k = 0; k < POLICY_KINDS; k++)
            policy_foreach(vh, (enum policy_kind)k, snap_policy, &sp);
        xpos = 0;
        while ((xs = hmap_next(&vh->exchanges, &xpos)) != NULL)
            if (store_keeps_exchange(xs->val) && !is_predeclared(xs->val)) {
                put_exchange(out, xs->val);
                n++;
            }
        qpos = 0;
        while ((qs = hmap_next(&vh->queues, &qpos)) != NULL)
            if (((struct queue *)qs->val)->sid) {
                put_queue(out, D_QUEUE, qs->val);
                n++;
            }
        /* Bindings after every exchange and queue they join. */
        xpos = 0;
        while ((xs = hmap_next(&vh->exchanges, &xpos)) != NULL) {
            struct exchange *x = xs->val;
            struct binding *b;
            TAILQ_FOREACH(b, &x->bindings, src_link)
                if (store_keeps_binding(b)) {
                    put_binding(out, D_BIND, b);
                    n++;
                }
        }
    }
    perm_foreach(snap_perm, &sp);
    return n + sp.n;
}

/* ---- replay ---- */

static struct vhost *
vhost_for(struct amqp_bytes name, bool create)
{
    struct vhost *vh = broker_vhost((const char *)name.ptr, name.len);
    if (vh == NULL && create) {
        char *n = xstrndup(name.ptr, name.len);
        vh = vhost_create(n, true);
        free(n);
    }
    return vh;
}

static struct amqp_bytes
get_bytes(struct rbuf *r)
{
    uint32_t len;
    const uint8_t *p = rbuf_str(r, &len);
    return (struct amqp_bytes){ p, p ? len : 0 };
}

/* The rest of a D_POLICY record, set as policy 'name' of 'vh'. */
static bool
replay_policy(struct rbuf *r, struct vhost *vh, uint8_t kind,
              const char *name)
{
    struct amqp_bytes pat = get_bytes(r), apply = get_bytes(r),
                      prio = get_bytes(r), def = get_bytes(r);
    char err[1024];
    if (r->bad)
        return false;
    json_t *jpat = json_stringn((const char *)pat.ptr, pat.len);
    json_t *japply = json_stringn((const char *)apply.ptr, apply.len);
    json_t *jprio = json_loadb((const char *)prio.ptr, prio.len,
                               JSON_DECODE_ANY, NULL);
    json_t *jdef = json_loadb((const char *)def.ptr, def.len, 0, NULL);
    int rc = jpat && japply && jprio && jdef
                 ? policy_set(vh, kind, name, jpat, japply, jprio, jdef, true,
                              err, sizeof(err))
                 : (snprintf(err, sizeof(err), "does not decode"), -1);
    if (rc < 0)
        log_warnx("store: policy '%s' in '%s': %s", name, vh->name, err);
    json_decref(jpat);
    json_decref(japply);
    json_decref(jprio);
    json_decref(jdef);
    return rc >= 0;
}

/* A D_VHOST record. */
static bool
apply_vhost(struct rbuf *r, struct amqp_bytes vname)
{
    struct vhost *vh;

    if (r->bad || (vh = vhost_for(vname, true)) == NULL)
        return false;
    if (r->off == r->len)
        return true;
    struct amqp_bytes desc = get_bytes(r), tags = get_bytes(r);
    int64_t maxc = (int64_t)rbuf_u64(r), maxq = (int64_t)rbuf_u64(r);
    if (r->bad)
        return false;
    char *d = xstrndup(desc.ptr, desc.len);
    char *t = xstrndup(tags.ptr, tags.len);
    vhost_set_meta(vh, d, t, true);
    free(d);
    free(t);
    vhost_set_limit(vh, VHOST_MAX_CONNECTIONS, maxc, true);
    vhost_set_limit(vh, VHOST_MAX_QUEUES, maxq, true);
    return true;
}

/* A D_VHOST_DEL record. */
static bool
apply_vhost_del(struct rbuf *r, struct amqp_bytes vname)
{
    if (r->bad)
        return false;
    char *n = xstrndup(vname.ptr, vname.len);
    (void)vhost_delete(n);
    free(n);
    return true;
}

/* A D_EXCHANGE record. */
static bool
apply_exchange(struct rbuf *r, struct amqp_bytes vname, uint32_t *max_qid)
{
    struct amqp_bytes name, xtype, args;
    struct vhost *vh;

    name = get_bytes(r);
    xtype = get_bytes(r);
    uint8_t flags = rbuf_u8(r);
    args = get_bytes(r);
    const struct exchange_ops *ops = exchange_ops_find(xtype);
    if (r->bad || ops == NULL)
        return false;
    vh = vhost_for(vname, true);
    struct exchange *x = vhost_exchange(vh, name);
    if (x) {
        if (x->is_default)
            return false;
        vhost_remove_exchange(vh, x);
        exchange_free(x);
    }
    uint32_t sid = r->off < r->len ? rbuf_u32(r) : 0;
    if (r->bad)
        return false;
    struct amqp_table t = { args.ptr, args.len };
    x = exchange_new(vh, name, ops, true, flags & 1, flags & 2, t);
    x->sid = sid;
    if (sid > *max_qid)
        *max_qid = sid;
    vhost_add_exchange(vh, x);
    return true;
}

/* A D_EXCHANGE_DEL record. */
static bool
apply_exchange_del(struct rbuf *r, struct amqp_bytes vname)
{
    struct amqp_bytes name;
    struct vhost *vh;

    name = get_bytes(r);
    if (r->bad || (vh = vhost_for(vname, false)) == NULL)
        return !r->bad;
    struct exchange *x = vhost_exchange(vh, name);
    if (x && !x->is_default) {
        vhost_remove_exchange(vh, x);
        exchange_free(x);
    }
    return true;
}

/* A D_QUEUE record. */
static bool
apply_queue(struct rbuf *r, struct amqp_bytes vname, uint32_t *max_qid)
{
    struct amqp_bytes name, args;
    struct vhost *vh;
    char err[512];

    name = get_bytes(r);
    uint32_t qid = rbuf_u32(r);
    uint8_t qflags = rbuf_u8(r);
    args = get_bytes(r);
    if (r->bad || qid == 0)
        return false;
    struct amqp_table t = { args.ptr, args.len };
    struct qargs qa;
    if (qargs_parse(t, "a recovered queue", &qa, err, sizeof(err)) !=
        QARGS_OK) {
        log_warnx("store: queue '%.*s': %s", (int)name.len,
                  (const char *)name.ptr, err);
        return false;
    }
    vh = vhost_for(vname, true);
    struct queue *q = vhost_queue(vh, name);
    if (q)
        queue_delete(q);
    q = queue_new(vh, name, true, false, qflags & 1, NULL, t, &qa);
    q->sid = qid;
    vhost_add_queue(vh, q);
    if (qid > *max_qid)
        *max_qid = qid;
    return true;
}

/* A D_QUEUE_DEL record. */
static bool
apply_queue_del(struct rbuf *r, struct amqp_bytes vname, uint32_t *max_qid)
{
    struct amqp_bytes name;
    struct vhost *vh;

    name = get_bytes(r);
    uint32_t qid = rbuf_u32(r);
    if (r->bad)
        return false;
    if (qid > *max_qid)
        *max_qid = qid;
    if ((vh = vhost_for(vname, false)) == NULL)
        return true;
    struct queue *q = vhost_queue(vh, name);
    if (q && q->sid == qid)
        queue_delete(q);
    return true;
}

/* A D_BIND or D_UNBIND record. */
static bool
apply_binding(uint8_t type, struct rbuf *r, struct amqp_bytes vname)
{
    struct amqp_bytes name, args, dest, key;
    struct vhost *vh;
    char err[512];

    name = get_bytes(r);
    uint8_t to_queue = rbuf_u8(r);
    dest = get_bytes(r);
    key = get_bytes(r);
    args = get_bytes(r);
    if (r->bad)
        return false;
    if ((vh = vhost_for(vname, false)) == NULL)
        return type == D_UNBIND;
    struct exchange *src = vhost_exchange(vh, name);
    struct queue *q = to_queue ? vhost_queue(vh, dest) : NULL;
    struct exchange *dx = to_queue ? NULL : vhost_exchange(vh, dest);
    struct amqp_table t = { args.ptr, args.len };
    if (src == NULL || (q == NULL && dx == NULL))
        return type == D_UNBIND;
    if (type == D_UNBIND) {
        (void)exchange_unbind(src, q, dx, key, t);
        return true;
    }
    return exchange_bind(src, q, dx, key, t, err, sizeof(err)) == 0;
}

/* A D_USER record. */
static bool
apply_user(struct rbuf *r, struct amqp_bytes vname)
{
    char err[512];

    /* 'vname' is the user's name. */
    uint8_t alg = rbuf_u8(r);
    struct amqp_bytes hash = get_bytes(r), tags = get_bytes(r);
    if (r->bad)
        return false;
    char *n = xstrndup(vname.ptr, vname.len);
    char *t = xstrndup(tags.ptr, tags.len);
    int rc = auth_put_user(n, alg, hash.ptr, hash.len, t, true, err,
                           sizeof(err));
    if (rc != 0)
        log_warnx("store: %s", err);
    free(n);
    free(t);
    return rc == 0;
}

/* A D_USER_DEL record. */
static bool
apply_user_del(struct rbuf *r, struct amqp_bytes vname)
{
    if (r->bad)
        return false;
    char *n = xstrndup(vname.ptr, vname.len);
    (void)auth_delete_user(n, true);
    free(n);
    return true;
}

/* A D_PERM record. */
static bool
apply_perm(struct rbuf *r, struct amqp_bytes vname)
{
    char err[512];

    /* 'vname' is the vhost; the user and the patterns follow. */
    struct amqp_bytes user = get_bytes(r), pat[PERM_KINDS];
    for (int k = 0; k < PERM_KINDS; k++)
        pat[k] = get_bytes(r);
    if (r->bad)
        return false;
    char *v = xstrndup(vname.ptr, vname.len);
    char *u = xstrndup(user.ptr, user.len);
    char *p[PERM_KINDS];
    for (int k = 0; k < PERM_KINDS; k++)
        p[k] = xstrndup(pat[k].ptr, pat[k].len);
    int rc = perm_set(v, u, (const char *const *)p, true, err,
                      sizeof(err));
    if (rc != 0)
        log_warnx("store: permissions of '%s' in '%s': %s", u, v, err);
    for (int k = 0; k < PERM_KINDS; k++)
        free(p[k]);
    free(v);
    free(u);
    return rc == 0;
}

/* A D_PERM_DEL record. */
static bool
apply_perm_del(struct rbuf *r, struct amqp_bytes vname)
{
    struct amqp_bytes user = get_bytes(r);
    if (r->bad)
        return false;
    char *v = xstrndup(vname.ptr, vname.len);
    char *u = xstrndup(user.ptr, user.len);
    (void)perm_clear(v, u, true);
    free(v);
    free(u);
    return true;
}

/* A D_POLICY or D_POLICY_DEL record. */
static bool
apply_policy(uint8_t type, struct rbuf *r, struct amqp_bytes vname)
{
    struct amqp_bytes name;
    struct vhost *vh;

    name = get_bytes(r);
    uint8_t kind = rbuf_u8(r);
    if (r->bad || kind >= POLICY_KINDS)
        return false;
    if ((vh = vhost_for(vname, false)) == NULL)
        return type == D_POLICY_DEL;
    char *n = xstrndup(name.ptr, name.len);
    bool ok = true;
    if (type == D_POLICY_DEL)
        (void)policy_clear(vh, kind, n, true);
    else
        ok = replay_policy(r, vh, kind, n);
    free(n);
    return ok;
}

/* One record; false if it does not make sense. */
static bool
apply(uint8_t type, struct rbuf *r, uint64_t *gen, uint32_t *max_qid)
{
    struct amqp_bytes vname;

    if (type == D_HEADER) {
        uint32_t fmt = rbuf_u32(r);
        *gen = rbuf_u64(r);
        return !r->bad && fmt == STORE_FORMAT;
    }
    vname = get_bytes(r);
    switch (type) {
    case D_VHOST:
        return apply_vhost(r, vname);
    case D_VHOST_DEL:
        return apply_vhost_del(r, vname);
    case D_EXCHANGE:
        return apply_exchange(r, vname, max_qid);
    case D_EXCHANGE_DEL:
        return apply_exchange_del(r, vname);
    case D_QUEUE:
        return apply_queue(r, vname, max_qid);
    case D_QUEUE_DEL:
        return apply_queue_del(r, vname, max_qid);
    case D_BIND:
    case D_UNBIND:
        return apply_binding(type, r, vname);
    case D_USER:
        return apply_user(r, vname);
    case D_USER_DEL:
        return apply_user_del(r, vname);
    case D_PERM:
        return apply_perm(r, vname);
    case D_PERM_DEL:
        return apply_perm_del(r, vname);
    case D_POLICY:
    case D_POLICY_DEL:
        return apply_policy(type, r, vname);
    default:
        return false;
    }
}

/* The file defs_replay() walks. */
struct defs_file {
    const char *file;
    uint64_t *gen;
    uint32_t *max_qid;
    long n;
    struct defs_damage dmg;
};

static void
apply_record(void *arg, const struct rec *rec, size_t off)
{
    struct defs_file *df = arg;
    struct rbuf r;

    df->dmg.records++;
    rbuf_init(&r, rec->payload, rec->len);
    if (!apply(rec->type, &r, df->gen, df->max_qid))
        log_warnx("store: %s: definition record of type %u at offset "
                  "%zu not applied", df->file, rec->type, off);
    else
        df->n++;
}

static void
report_fault(void *arg, enum rec_fault f, size_t off, size_t n)
{
    struct defs_file *df = arg;

    if (f == REC_TORN) {
        df->dmg.torn = true;
        df->dmg.torn_at = off;
        log_warnx("store: %s: torn record at offset %zu cut (%zu bytes)",
                  df->file, off, n);
    } else {
        df->dmg.corrupt++;
        log_warnx("store: %s: corrupt record at offset %zu skipped (%zu "
                  "bytes)", df->file, off, n);
    }
}

bool
defs_is_damaged(const struct defs_damage *d)
{
    return d->corrupt > 0 || (d->torn && d->records == 0);
}

long
defs_replay(const char *file, const uint8_t *p, size_t len, uint64_t *gen,
            uint32_t *max_qid, struct defs_damage *dmg)
{
    struct defs_file df = { file, gen, max_qid, 0, { 0 } };

    *gen = 0;
    size_t end = rec_walk(p, len, apply_record, report_fault, &df);
    /* The walk stops at a zero header: what follows must be zeros too
     * (the log is never preallocated, so a zero header means bytes
     * that were never written, or were written over). */
    for (size_t i = end; i < len && !df.dmg.hidden; i++)
        if (p[i] != 0) {
            df.dmg.hidden = true;
            log_warnx("store: %s: records at offset %zu hidden behind "
                      "zeros from offset %zu", file, i, end);
        }
    if (dmg)
        *dmg = df.dmg;
    return df.n;
}
