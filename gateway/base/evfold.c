/*
 * evfold.c - a loop's events until they are sent, and refusals folded
 * per lock, error code and second (evfold.h).
 *
 * Invariant: nothing here allocates; every copy is bounded by its
 * field's size, and a fold's entry leaves once its second ended.
 */
#include <stdio.h>
#include <string.h>

#include "base/evfold.h"
#include "base/text.h"

void fg_evbuf_clear(struct fg_evbuf *b)
{
	b->n = 0;
}

struct fg_evnote *fg_evbuf_add(struct fg_evbuf *b)
{
	if (b->n >= FG_EVBUF_MAX)
		return NULL;
	struct fg_evnote *e = &b->item[b->n++];
	memset(e, 0, sizeof(*e));
	return e;
}

void fg_evfold_init(struct fg_evfold *f)
{
	memset(f, 0, sizeof(*f));
}

/* Bytes copied as the events' format keeps them: printable ASCII but '"'
 * and '\' as is, anything else as %XX (so a path is JSON text with
 * nothing to escape, and no byte of it can move an operator's terminal);
 * a %XX is never cut in half. Stops at the end, at `stop` (a byte that
 * ends what is copied, or 0) or when cap - 1 bytes are written. */
static size_t clean_copy(char *out, size_t cap, const char *in, char stop)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in;
	     *p && *p != (unsigned char)stop; p++) {
		if (*p > ' ' && *p < 0x7f && *p != '"' && *p != '\\') {
			if (o + 1 >= cap)
				break;
			out[o++] = (char)*p;
		} else {
			if (o + 3 >= cap)
				break;
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
	return o;
}

size_t fg_evpath(const char *target, char out[FG_EVPATH_MAX + 1])
{
	/* the query (and a fragment, which no proxied request has) never */
	const char *t = target ? target : "";
	size_t n = strcspn(t, "?#");
	char tmp[FG_EVPATH_MAX + 1];
	size_t take = n < FG_EVPATH_MAX ? n : FG_EVPATH_MAX;
	memcpy(tmp, t, take);
	tmp[take] = '\0';
	return clean_copy(out, FG_EVPATH_MAX + 1, tmp, 0);
}

size_t fg_evdetail_refused(char out[FG_EVDETAIL_MAX], const char *code,
			   const char *method, const char *path,
			   uint32_t count)
{
	int n = snprintf(out, FG_EVDETAIL_MAX,
			 "{\"code\":\"%s\",\"method\":\"%s\",\"path\":\"%s\","
			 "\"count\":%u}", code ? code : "", method ? method : "",
			 path ? path : "", (unsigned)count);
	/* the sizes above leave room for every field at its longest */
	return n > 0 && n < FG_EVDETAIL_MAX ? (size_t)n : 0;
}

/* The refusal's event, without its detail. */
static void item_of(struct fg_evnote *e, const struct fg_evrefusal *r)
{
	memset(e, 0, sizeof(*e));
	e->kind = "refused";
	fg_copy(e->lock, sizeof(e->lock), r->lock ? r->lock : "");
	fg_copy(e->principal, sizeof(e->principal), r->principal ? r->principal : "");
	fg_copy(e->owner, sizeof(e->owner), r->owner ? r->owner : "");
	fg_copy(e->client, sizeof(e->client), r->client ? r->client : "");
	e->token = r->token;
	e->has_token = r->token != 0;
}

static struct fg_evfold_entry *find(struct fg_evfold *f, const char *lock,
				    const char *code, uint64_t second)
{
	for (unsigned i = 0; i < FG_EVFOLD_MAX; i++) {
		struct fg_evfold_entry *x = &f->e[i];
		if (x->used && x->second == second &&
		    strcmp(x->code, code) == 0 && strcmp(x->first.lock, lock) == 0)
			return x;
	}
	return NULL;
}

static struct fg_evfold_entry *free_entry(struct fg_evfold *f)
{
	for (unsigned i = 0; i < FG_EVFOLD_MAX; i++)
		if (!f->e[i].used)
			return &f->e[i];
	return NULL;
}

enum fg_evfold_verdict fg_evfold_refused(struct fg_evfold *f, uint64_t now_ms,
					 const struct fg_evrefusal *r,
					 struct fg_evnote *out)
{
	uint64_t second = now_ms / 1000;
	const char *lock = r->lock ? r->lock : "", *code = r->code ? r->code : "";
	char method[FG_EVMETHOD_MAX + 1], path[FG_EVPATH_MAX + 1];
	/* compared as the entry keeps them: cut to their fields' size */
	char lk[FG_NAME_MAX + 1], cd[FG_EVCODE_MAX];
	fg_copy(lk, sizeof(lk), lock);
	fg_copy(cd, sizeof(cd), code);
	struct fg_evfold_entry *x = find(f, lk, cd, second);
	if (x) {
		if (x->pending++ == 0) {
			item_of(&x->first, r);
			clean_copy(x->method, sizeof(x->method),
				   r->method ? r->method : "", 0);
			fg_evpath(r->path, x->path);
		}
		return FG_EVFOLD_FOLDED;
	}
	x = free_entry(f);
	if (!x)
		return FG_EVFOLD_FULL;
	memset(x, 0, sizeof(*x));
	x->used = true;
	x->second = second;
	fg_copy(x->code, sizeof(x->code), cd);
	fg_copy(x->first.lock, sizeof(x->first.lock), lk);
	f->n++;
	item_of(out, r);
	clean_copy(method, sizeof(method), r->method ? r->method : "", 0);
	fg_evpath(r->path, path);
	fg_evdetail_refused(out->detail, cd, method, path, 1);
	return FG_EVFOLD_FIRST;
}

unsigned fg_evfold_expire(struct fg_evfold *f, uint64_t now_ms,
			  fg_evfold_emit *emit, void *arg)
{
	uint64_t second = now_ms / 1000;
	unsigned emitted = 0;
	for (unsigned i = 0; i < FG_EVFOLD_MAX && f->n > 0; i++) {
		struct fg_evfold_entry *x = &f->e[i];
		if (!x->used || x->second >= second)
			continue;
		if (x->pending > 0) {
			fg_evdetail_refused(x->first.detail, x->code, x->method,
					    x->path, x->pending);
			emit(arg, &x->first);
			emitted++;
		}
		x->used = false;
		f->n--;
	}
	return emitted;
}

uint64_t fg_evfold_next_ms(const struct fg_evfold *f)
{
	uint64_t next = 0;
	for (unsigned i = 0; i < FG_EVFOLD_MAX && f->n > 0; i++) {
		const struct fg_evfold_entry *x = &f->e[i];
		if (x->used && (next == 0 || (x->second + 1) * 1000 < next))
			next = (x->second + 1) * 1000;
	}
	return next;
}
