/*
 * help.c - the text of `fencectl --help` and of each subcommand's --help.
 * Invariant: every option a subcommand's table accepts is named in its
 * help, and docs/fencectl.1 says the same; so does every exit status of
 * exits.h.
 */
#include "cli.h"

#define GLOBAL_HELP \
"Global options (before or after the command):\n" \
"  --gateway URL   the gateway; repeat it or give a comma list for\n" \
"                  several, tried in turn (default: $FENCEGATE_URL, the\n" \
"                  same, else " FG_DEFAULT_GATEWAY ")\n" \
"  --timeout D     bound on each call to each gateway, its connect and\n" \
"                  its answer, beyond any wait it asks for (default\n" \
"                  10s; connecting: at most 5s of it)\n" \
"  --json          print the gateway's JSON answers\n" \
"  --verbose       say each call and what came of it on stderr (never a\n" \
"                  lease or a key)\n" \
"  --key-file FILE send the bearer key held in FILE (default:\n" \
"                  $FENCEGATE_KEY_FILE); a key is never given itself\n" \
"  --cacert FILE   verify an https:// gateway against this CA (PEM);\n" \
"                  default: the system's CAs. Verification is always on\n" \
"  --cert FILE     present this client certificate (PEM) to the gateway\n" \
"  --key FILE      the private key of --cert (PEM; default: in --cert)\n" \
"  -h, --help      show this help\n"

#define DURATIONS_HELP \
"Durations (D): 500ms, 30s, 2m, 1h, 1m30s, 1.5s; a plain number counts\n" \
"seconds.\n"

const char fg_help_main[] =
"Usage: fencectl [OPTIONS] COMMAND [ARGS]\n"
"\n"
"Leased, fenced locks from a fencegate gateway, on the command line.\n"
"\n"
"Commands:\n"
"  lock NAME [OPTIONS] [-- CMD [ARG]... | -c CMD]\n"
"                        run CMD while holding lock NAME; without CMD,\n"
"                        hold it and print its token and sequencer\n"
"  elect NAME VALUE [OPTIONS] -- CMD [ARG]...\n"
"                        run CMD while leader of election NAME\n"
"  acquire NAME          take a lock; print its lease, token and sequencer\n"
"  renew NAME            extend a lease\n"
"  release NAME          give a lease back\n"
"  inspect NAME          show a lock's state; --watch follows it\n"
"  check [SEQUENCER]     ask whether a sequencer is current\n"
"  break NAME            end the grant that holds a lock (needs admin)\n"
"  ls [PREFIX]           list the locks held, waited for or in lock-delay\n"
"  events [PREFIX]       print what happened to locks; --follow waits for\n"
"                        more\n"
"  help [COMMAND]        show a command's help\n"
"\n"
GLOBAL_HELP
"  --version       show the version\n"
"\n"
DURATIONS_HELP
"\n"
"Exit status:\n"
"  0    success; for lock and elect, CMD's status (128+N if signal N\n"
"       ended it; 126 CMD cannot run, 127 CMD not found)\n"
"  1    check: the sequencer is not valid; break: the lock is free\n"
"  64   bad usage (also a key file or TLS file that cannot be used)\n"
"  65   the gateway refused the request as invalid (a bad lock name, a\n"
"       value too long)\n"
"  69   the gateway is unavailable (no answer, a timeout, 5xx), or its\n"
"       certificate cannot be verified\n"
"  70   out of memory\n"
"  71   a system call failed (fork, pipe, signalfd)\n"
"  75   the lock was not granted within --wait (or -E's code)\n"
"  76   an answer fencectl does not understand\n"
"  77   not allowed: the gateway does not know who you are (401), you\n"
"       lack the right (403), or it refuses your address for a while\n"
"       after too many unknown keys (429)\n"
"  79   the lease was lost, or does not hold the lock; break: the\n"
"       token is not the current grant's\n"
"\n"
"See fencectl(1).\n";

const char fg_help_lock[] =
"Usage: fencectl lock NAME [OPTIONS] [--] CMD [ARG]...\n"
"       fencectl lock NAME [OPTIONS] -c CMD\n"
"       fencectl lock NAME [OPTIONS]\n"
"\n"
"Takes lock NAME, waiting for it as long as --wait allows, runs CMD while\n"
"renewing the lease in the background, and releases the lock when CMD\n"
"exits. CMD's environment has FENCE_LOCK, FENCE_TOKEN, FENCE_SEQUENCER\n"
"(send it as the Fencing-Token header of writes) and FENCEGATE_URL.\n"
"Without CMD, holds the lock (renewing it), prints FENCE_LOCK=,\n"
"FENCE_TOKEN= and FENCE_SEQUENCER= lines (--json: one object) and waits\n"
"for a signal (Ctrl-C, SIGTERM, SIGHUP...); then releases it and exits\n"
"with 128 + the signal's number.\n"
"\n"
"If the lease is lost (a renewal is answered 410, or no renewal succeeds\n"
"before the lease would run out), CMD gets SIGTERM, then SIGKILL after\n"
"--kill-after, and fencectl exits with 79. Signals sent to fencectl\n"
"(HUP, INT, QUIT, TERM, USR1, USR2, ALRM, WINCH) are passed on to CMD.\n"
"The exit status is CMD's.\n"
"\n"
"Options:\n"
"  --ttl D          lease length (default 30s; 100ms to 1h); renewed\n"
"                   every third of it\n"
"  -w, --wait D     how long to wait for the lock (default: forever;\n"
"                   0 tries once; 'forever')\n"
"  -n, --no-wait    try once (--wait 0)\n"
"  -E, --conflict-exit-code N\n"
"                   exit with N (0 to 255) when not granted (default 75)\n"
"  --unreachable D  while waiting, how long to keep trying when no\n"
"                   gateway answers at all, each in turn (default 30s);\n"
"                   then exit 69\n"
"  -c, --command CMD  run CMD through $SHELL -c (else /bin/sh -c)\n"
"  --shared         a shared grant (its sequencer cannot fence writes)\n"
"  --owner TEXT     shown by inspect while the lock is held (default:\n"
"                   user@host:pid)\n"
"  --value TEXT     the lock's value while held\n"
"  --lock-delay D   lock-delay of this grant (0 to 1h)\n"
"  --s3             also set AWS_SESSION_TOKEN to the sequencer, so that an\n"
"                   S3 client (aws, boto3, s3cmd, rclone) sends it signed\n"
"                   with every request through a gateway in S3 mode; one\n"
"                   that holds sequencers already gets it after a comma\n"
"  --kill-after D   SIGKILL this long after the SIGTERM of a lost lease\n"
"                   (default 10s)\n"
"  --process-group  run CMD in a process group of its own and signal the\n"
"                   whole group (CMD then cannot read the terminal)\n"
"\n"
GLOBAL_HELP
"\n"
DURATIONS_HELP;

const char fg_help_elect[] =
"Usage: fencectl elect NAME VALUE [OPTIONS] [--] CMD [ARG]...\n"
"       fencectl elect NAME VALUE [OPTIONS] [-c CMD]\n"
"\n"
"Campaigns in election NAME with VALUE (for example this node's address):\n"
"waits as long as it takes to become leader (the holder of lock NAME,\n"
"whose value others read with inspect), then runs CMD as `lock` does:\n"
"renewing, passing signals on, stopping CMD if leadership is lost (exit\n"
"79), and resigning when CMD exits. The exit status is CMD's. Without\n"
"CMD, holds the leadership as `lock` without CMD holds a lock.\n"
"\n"
"Options:\n"
"  --ttl D          lease length (default 30s; 100ms to 1h)\n"
"  -w, --wait D     give up after this long (default: forever)\n"
"  -n, --no-wait    try once\n"
"  -E, --conflict-exit-code N\n"
"                   exit with N when not leader in time (default 75)\n"
"  --unreachable D  while waiting, how long to keep trying when no\n"
"                   gateway answers at all, each in turn (default 30s);\n"
"                   then exit 69\n"
"  -c, --command CMD  run CMD through $SHELL -c (else /bin/sh -c)\n"
"  --owner TEXT     shown by inspect while leader (default:\n"
"                   user@host:pid)\n"
"  --lock-delay D   lock-delay of this grant (0 to 1h)\n"
"  --kill-after D   SIGKILL this long after the SIGTERM of a lost\n"
"                   leadership (default 10s)\n"
"  --process-group  run CMD in a process group of its own\n"
"\n"
GLOBAL_HELP
"\n"
DURATIONS_HELP;

const char fg_help_acquire[] =
"Usage: fencectl acquire NAME [OPTIONS]\n"
"\n"
"Takes lock NAME and prints FENCE_LOCK, FENCE_LEASE, FENCE_TOKEN and\n"
"FENCE_SEQUENCER as exported shell variables, for eval; renew, release\n"
"and check then find the lease and the sequencer there:\n"
"\n"
"  eval \"$(fencectl acquire orders/42 --ttl 1m)\"\n"
"\n"
"The lease is the only proof of ownership: keep it secret. Nothing renews\n"
"it; see renew and release. With --json, prints the gateway's answer.\n"
"\n"
"Options:\n"
"  --ttl D          lease length (default 30s; 100ms to 1h)\n"
"  -w, --wait D     how long to wait for the lock (default 0: try once;\n"
"                   'forever')\n"
"  -n, --no-wait    try once (the default)\n"
"  -E, --conflict-exit-code N\n"
"                   exit with N (0 to 255) when not granted (default 75)\n"
"  --unreachable D  while waiting, how long to keep trying when no\n"
"                   gateway answers at all, each in turn (default 30s);\n"
"                   then exit 69\n"
"  --shared         a shared grant\n"
"  --owner TEXT     shown by inspect while the lock is held (default:\n"
"                   user@host:pid)\n"
"  --value TEXT     the lock's value while held\n"
"  --lock-delay D   lock-delay of this grant (0 to 1h)\n"
"  --lease LEASE    re-enter the grant that holds this lease\n"
"\n"
GLOBAL_HELP
"\n"
DURATIONS_HELP;

const char fg_help_renew[] =
"Usage: fencectl renew NAME [OPTIONS]\n"
"\n"
"Extends the lease on lock NAME to now + its length. The lease comes from\n"
"--lease, else from $FENCE_LEASE. Prints nothing unless --json.\n"
"\n"
"Options:\n"
"  --lease LEASE    the lease (default: $FENCE_LEASE)\n"
"  --ttl D          a new lease length (default: the current one)\n"
"  --value TEXT     a new value for the lock\n"
"\n"
GLOBAL_HELP
"\n"
DURATIONS_HELP;

const char fg_help_release[] =
"Usage: fencectl release NAME [OPTIONS]\n"
"\n"
"Gives back one hold of the lease on lock NAME. The lease comes from\n"
"--lease, else from $FENCE_LEASE. Prints nothing unless --json.\n"
"\n"
"Options:\n"
"  --lease LEASE    the lease (default: $FENCE_LEASE)\n"
"\n"
GLOBAL_HELP;

const char fg_help_inspect[] =
"Usage: fencectl inspect NAME [--watch]\n"
"\n"
"Shows lock NAME's state: held, mode, token, holders, waiters, ttl_ms,\n"
"and owner and value while held.\n"
"\n"
"Options:\n"
"  -w, --watch      print one line (with --json: one JSON object) now\n"
"                   and one more each time the lock is taken or\n"
"                   given up (held or token changes), until interrupted\n"
"\n"
GLOBAL_HELP;

const char fg_help_ls[] =
"Usage: fencectl ls [PREFIX]\n"
"\n"
"Lists the locks whose names start with PREFIX (default: all) that are\n"
"held, waited for or in lock-delay, in name order: a row per lock (NAME,\n"
"MODE, TOKEN, TTL_MS, DELAY_MS, and how many HOLDERS and WAITERS), then a\n"
"line per holder (longest held first) and per waiter (in queue order)\n"
"with its owner, principal, client address and the ms it has held or\n"
"waited. Leases are never shown. With --json: {\"locks\":[...]} as the\n"
"gateway answers, every page joined. Needs the observe right on PREFIX\n"
"when the gateway checks rights.\n"
"\n"
GLOBAL_HELP;

const char fg_help_events[] =
"Usage: fencectl events [PREFIX] [--follow]\n"
"\n"
"Prints what happened to the locks whose names start with PREFIX\n"
"(default: all), oldest first, from the oldest event the gateway keeps:\n"
"one line per event with its time (UTC), kind (granted, released,\n"
"expired, broken, given_back, lease_lost, refused), lock, then token=,\n"
"principal=, owner= and client= (\"-\" when not known), and what the\n"
"kind adds: for refused the error code=, method=, path= and count= (the\n"
"refusals of one lock and code within a second folded into one), for\n"
"granted mode= and ttl_ms=, for broken by=, for given_back reason=.\n"
"Bytes that are not printable ASCII, and spaces, are shown as \\xHH.\n"
"Leases, keys and sequencers are never shown. With --json: each event's\n"
"JSON object, as the gateway answers it, on a line of its own. When the\n"
"gateway no longer keeps events between two pages, a line on stderr\n"
"says so. Needs the observe right on PREFIX when the gateway checks\n"
"rights, and shows only the events of locks you may observe.\n"
"\n"
"Options:\n"
"  -f, --follow     once every event is printed, wait for more and print\n"
"                   each as it comes, until interrupted; a gateway that\n"
"                   does not answer is asked again (said once on stderr)\n"
"\n"
GLOBAL_HELP;

const char fg_help_check[] =
"Usage: fencectl check [SEQUENCER]\n"
"\n"
"Asks the gateway whether SEQUENCER (default: $FENCE_SEQUENCER) belongs\n"
"to the grant that holds its lock now. Exits 0 when it does; otherwise\n"
"prints why (stale, expired, forged, malformed) and exits 1.\n"
"\n"
GLOBAL_HELP;

const char fg_help_break[] =
"Usage: fencectl break NAME [--token N]\n"
"\n"
"Ends the grant that holds lock NAME now, as if its lease had run out:\n"
"its writes in flight are aborted and its lock-delay applies. For\n"
"operators: it needs the admin right on the lock when the gateway checks\n"
"rights. Without --token, fencectl first asks which token holds the lock\n"
"and breaks that one, and says which (\"broke lock 'NAME', token N\").\n"
"A grant that ends or changes meanwhile is never broken by mistake: the\n"
"gateway breaks only the token named.\n"
"\n"
"Exit status: 0 broken; 1 the lock is free, nothing to break; 79 the\n"
"token is not the current grant's (nothing was broken); 77 not allowed.\n"
"\n"
"Options:\n"
"  --token N        break only the grant with this token\n"
"\n"
GLOBAL_HELP;
