#!/usr/bin/env python3
"""install-conf.py DIR - meson's install step for the config: copies
DIR/fencegate.conf.example to DIR/fencegate.conf (under $DESTDIR) when no
fencegate.conf is there, so a reinstall never overwrites an edited config,
as nginx's install keeps nginx.conf."""

import os
import shutil
import sys


def main():
    folder = sys.argv[1]
    destdir = os.environ.get("DESTDIR", "")
    if destdir:
        # DIR is absolute; under a staging root it is DESTDIR + DIR
        folder = os.path.join(destdir, folder.lstrip("/"))
    example = os.path.join(folder, "fencegate.conf.example")
    conf = os.path.join(folder, "fencegate.conf")
    if os.path.exists(conf):
        print("Keeping %s (the new example is %s)" % (conf, example))
        return 0
    shutil.copyfile(example, conf)
    os.chmod(conf, 0o644)
    print("Installing %s" % conf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
