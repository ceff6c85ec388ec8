/*
 * report.h - the last step of every request, as nginx's LOG phase: its
 * closed record goes to the metrics and to the access log, once.
 * Private to the gateway.
 */
#ifndef FENCEGATE_REPORT_H
#define FENCEGATE_REPORT_H

#include "base/record.h"

/** Counts a closed record (fg_rec_close()) in the metrics and writes its
 *  access line naming gateway `gw_id`. Once per request, on its loop. */
void fg_report(const char *gw_id, const struct fg_rec *r);

#endif
