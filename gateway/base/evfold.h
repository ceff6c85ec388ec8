/*
 * evfold.h - the pure part of a loop's event recorder (rt/evrec.c): the
 * events one loop turn collects, refusals folded per lock and error code
 * per second, and a refusal's detail as the events' format has it
 * (contract v1.5). No I/O, no clock of its own: the caller hands it the
 * time. Private to the gateway.
 *
 * Invariants: every table here is of fixed size (FG_EVBUF_MAX events a
 * turn, FG_EVFOLD_MAX folds a second); what does not fit is refused, and
 * the caller counts it dropped. A recorded path is the request's path
 * only, never its query (an S3 presigned URL carries its credentials
 * there), at most FG_EVPATH_MAX bytes of printable ASCII: any other byte,
 * and '"' and '\', is written as %XX. No event holds a lease, a key or a
 * sequencer: nothing here is handed one.
 *
 * Folding: the first refusal of a (lock, code) in a second of the
 * caller's clock is an event of its own, with count 1, sent at the end
 * of its turn; the later ones of that second are counted in the fold,
 * which becomes one event at the end of the second (fg_evfold_expire()),
 * showing the first of them (its method, path, token and who) and how
 * many they were. A steady stream of refusals is thus at most two events
 * a second per lock and code.
 */
#ifndef FENCEGATE_EVFOLD_H
#define FENCEGATE_EVFOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"

#define FG_EVBUF_MAX 128     /* events one loop turn collects */
#define FG_EVFOLD_MAX 64     /* (lock, code) folds a loop keeps a second */
#define FG_EVPATH_MAX 256    /* a refused request's path, as recorded */
#define FG_EVMETHOD_MAX 16   /* its method, as recorded */
#define FG_EVCODE_MAX 32     /* an error code (base/errors.c's) */
#define FG_EVCLIENT_MAX 48   /* a client's address (the record's size) */
/* {"code":"…","method":"…","path":"…","count":N} */
#define FG_EVDETAIL_MAX (FG_EVCODE_MAX + FG_EVMETHOD_MAX + FG_EVPATH_MAX + 64)

/* One event as a loop holds it until it is sent: copies, "" for absent. */
struct fg_evnote {
	const char *kind;                         /* a string constant */
	char lock[FG_NAME_MAX + 1];
	char principal[FG_PRINCIPAL_MAX + 1];
	char owner[FG_OWNER_MAX + 1];
	char client[FG_EVCLIENT_MAX];
	char detail[FG_EVDETAIL_MAX];             /* a JSON object, "" none */
	uint64_t token;
	bool has_token;
};

/* The events of one turn, oldest first. */
struct fg_evbuf {
	unsigned n;
	struct fg_evnote item[FG_EVBUF_MAX];
};

/* A fenced write refused, as its owner hands it over (borrowed strings;
 * NULL for absent). path is the request target as sent: the query is
 * cut off here. */
struct fg_evrefusal {
	const char *lock, *code, *method, *path;
	const char *principal, *owner, *client;
	uint64_t token;    /* 0: none was read */
};

struct fg_evfold_entry {
	bool used;
	uint64_t second;               /* of the caller's clock, ms / 1000 */
	char code[FG_EVCODE_MAX];
	uint32_t pending;              /* refusals after the second's first */
	char method[FG_EVMETHOD_MAX + 1], path[FG_EVPATH_MAX + 1];
	struct fg_evnote first;        /* the first pending one; detail unset */
};

struct fg_evfold {
	unsigned n;                    /* entries used */
	struct fg_evfold_entry e[FG_EVFOLD_MAX];
};

enum fg_evfold_verdict {
	FG_EVFOLD_FIRST,   /* the first of its second: *out is its event */
	FG_EVFOLD_FOLDED,  /* counted in its second's fold */
	FG_EVFOLD_FULL,    /* no room for another fold this second: dropped */
};

/** Empties b. */
void fg_evbuf_clear(struct fg_evbuf *b);

/** A free place at the end of b, zeroed, for the caller to fill; NULL
 *  when b is full (the event is dropped). */
struct fg_evnote *fg_evbuf_add(struct fg_evbuf *b);

/** Empties f. */
void fg_evfold_init(struct fg_evfold *f);

/** One refusal at now_ms: the first of its (lock, code) this second (its
 *  event written into *out, count 1), folded, or dropped. */
enum fg_evfold_verdict fg_evfold_refused(struct fg_evfold *f, uint64_t now_ms,
					 const struct fg_evrefusal *r,
					 struct fg_evnote *out);

typedef void fg_evfold_emit(void *arg, const struct fg_evnote *e);

/** Ends the folds of every second before now_ms's: each that counted
 *  refusals after its first is handed to emit as one event (its count
 *  in the detail); all of them leave. Returns how many were emitted. */
unsigned fg_evfold_expire(struct fg_evfold *f, uint64_t now_ms,
			  fg_evfold_emit *emit, void *arg);

/** When the earliest fold's second ends (ms of the caller's clock), or 0
 *  when f holds none. */
uint64_t fg_evfold_next_ms(const struct fg_evfold *f);

/** The request target's path as recorded (the rules above) into out
 *  (FG_EVPATH_MAX + 1 bytes); returns its length. */
size_t fg_evpath(const char *target, char out[FG_EVPATH_MAX + 1]);

/** A refusal's detail, {"code":…,"method":…,"path":…,"count":N}, into out
 *  (FG_EVDETAIL_MAX bytes); method and path as fg_evpath() leaves them
 *  (nothing to escape), code one of the error table's. Returns its
 *  length. */
size_t fg_evdetail_refused(char out[FG_EVDETAIL_MAX], const char *code,
			   const char *method, const char *path,
			   uint32_t count);

#endif
