/*
 * fencegate/error.h - the one error convention of lockcore.
 *
 * Every lockcore function returns 0 (FG_OK) on success or one of these
 * negative codes. A function that fails leaves Redis state unaltered (the
 * scripts are atomic: they either ran whole or not at all) and never calls
 * its callback.
 */
#ifndef FENCEGATE_ERROR_H
#define FENCEGATE_ERROR_H

enum fg_err {
	FG_OK = 0,
	FG_EUNAVAIL = -1, /* Redis cannot be reached, or timed out */
	FG_ENOMEM = -2,   /* allocation failed */
	FG_EPROTO = -3,   /* Redis answered something the scripts never return */
	FG_EINVAL = -4,   /* argument out of the documented range */
	FG_ENOKEY = -5,   /* the HMAC key is not loaded yet */
	FG_EREPLICAS = -6, /* fewer replicas than asked for took a grant in
			      time (WAIT); the grant was given back */
};

/** Short static text for an fg_err, for logs. Never NULL. */
const char *fg_strerror(int err);

#endif
