#!/usr/bin/env python3
"""rusage.py FILE CMD [ARG...]: runs CMD and, when it ends, writes its CPU
use to FILE as "<user+system seconds> <voluntary> <involuntary context
switches>" (its own and that of the children it waited for). Exits as CMD did.
"""
import os
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write("%.3f %d %d\n" % (ru.ru_utime + ru.ru_stime, ru.ru_nvcsw, ru.ru_nivcsw))
sys.exit(os.waitstatus_to_exitcode(status))
