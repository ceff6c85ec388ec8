"""test_install.py - what `meson install` puts in place besides the
programs (README, "Install by hand"; docs/operations.md, "systemd"): the
systemd unit with the installed paths, the example config and the
logrotate rule, an edited config kept on a second install; the unit
passes `systemd-analyze verify` and `systemd-analyze security` rates it
OK or better (exposure 4.9 or less); the installed config passes
`fencegate --check-config`. The build under test is the one holding
--bin (<builddir>/gateway/fencegate); it is installed under a staging
root (--destdir), never into the machine."""

import json
import os
import re
import shutil
import subprocess
import tempfile

import harness
from harness import SetupError, TestCase, slack

# `systemd-analyze security` prints "Overall exposure level for X: 1.2 OK";
# its --threshold is that number times ten. OK ends at 4.9 (5.0 is MEDIUM).
EXPOSURE_OK = 49


def _tool(name, why):
    exe = shutil.which(name)
    if not exe:
        raise SetupError("%s is not installed: %s" % (name, why))
    return exe


def _builddir():
    return os.path.dirname(os.path.dirname(harness.Config.bin))


def _option(options, name):
    for o in options:
        if o["name"] == name:
            return o["value"]
    raise SetupError("meson introspect names no option %r" % name)


class InstallTests(TestCase):
    axes = ()               # what meson installs: one build is enough
    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.meson = _tool("meson", "the install test runs `meson install`")
        self.dest = tempfile.mkdtemp(prefix="install-", dir=harness.tmp_root())
        self.addCleanup(shutil.rmtree, self.dest, True)
        r = subprocess.run([self.meson, "introspect", "--buildoptions",
                            _builddir()], capture_output=True, text=True,
                           timeout=slack(60))
        if r.returncode != 0:
            raise SetupError("meson introspect failed: %s" % r.stderr)
        opts = json.loads(r.stdout)
        prefix = _option(opts, "prefix")
        self.bindir = os.path.join(prefix, _option(opts, "bindir"))
        self.etc = os.path.join(prefix, _option(opts, "sysconfdir"))
        unitdir = _option(opts, "systemdunitdir")
        self.unitdir = unitdir or os.path.join(prefix, "lib", "systemd",
                                               "system")

    def staged(self, path):
        return os.path.join(self.dest, path.lstrip("/"))

    def install(self):
        # --no-rebuild: the build under test as it is; nothing else is
        # written in the build folder but meson's install log
        r = subprocess.run([self.meson, "install", "-C", _builddir(),
                            "--no-rebuild", "--destdir", self.dest],
                           capture_output=True, text=True, timeout=slack(120))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def unit(self):
        with open(self.staged(os.path.join(self.unitdir,
                                           "fencegate.service"))) as f:
            return f.read()

    def test_install_puts_unit_config_and_logrotate_in_place(self):
        self.install()
        unit = self.unit()
        exe = os.path.join(self.bindir, "fencegate")
        conf = os.path.join(self.etc, "fencegate", "fencegate.conf")
        self.assertTrue(os.access(self.staged(exe), os.X_OK), exe)
        self.assertNotRegex(unit, r"@[A-Z]+@", "a placeholder left in the unit")
        self.assertRegex(unit, r"(?m)^ExecStart=%s --config %s "
                         % (re.escape(exe), re.escape(conf)))
        self.assertRegex(unit, r"(?m)^ExecReload=%s --check-config --config %s "
                         % (re.escape(exe), re.escape(conf)))
        self.assertIn("LoadCredential=hmac.key:%s\n"
                      % os.path.join(self.etc, "fencegate", "hmac.key"), unit)
        self.assertIn("--key-file %d/hmac.key", unit)
        for f in (conf, conf + ".example",
                  os.path.join(self.etc, "logrotate.d", "fencegate")):
            self.assertTrue(os.path.isfile(self.staged(f)), f)
        with open(self.staged(conf)) as f:
            text = f.read()
        # the thread count is the gateway's default (one loop per core)
        self.assertNotRegex(text, r"(?m)^\s*threads\s")
        with open(self.staged(os.path.join(self.etc, "logrotate.d",
                                           "fencegate"))) as f:
            self.assertIn("/var/log/fencegate/access.log", f.read())

        # the installed config, as the unit's ExecReload checks it (the
        # log folder is systemd's LogsDirectory=, absent here)
        key = os.path.join(self.dest, "hmac.key")
        with open(key, "wb") as f:
            f.write(os.urandom(32).hex().encode()[:32])
        r = subprocess.run([self.staged(exe), "--check-config", "--config",
                            self.staged(conf), "--key-file", key,
                            "--access-log", "off"],
                           capture_output=True, text=True, timeout=slack(30))
        self.assertEqual((r.returncode, r.stdout.strip()),
                         (0, "fencegate: configuration ok"), r.stderr)

    def test_second_install_keeps_an_edited_config(self):
        self.install()
        conf = self.staged(os.path.join(self.etc, "fencegate",
                                        "fencegate.conf"))
        with open(conf, "a") as f:
            f.write("# edited by the operator\n")
        self.install()
        with open(conf) as f:
            self.assertTrue(f.read().endswith("# edited by the operator\n"))
        self.assertTrue(os.path.isfile(conf + ".example"))

    def test_unit_verifies_and_rates_ok(self):
        sa = _tool("systemd-analyze", "it verifies and rates "
                   "deploy/fencegate.service (Debian package systemd)")
        self.install()
        # verify checks that ExecStart's program exists: point the unit at
        # the staged one (the name of the unit file must stay)
        d = tempfile.mkdtemp(prefix="unit-", dir=harness.tmp_root())
        self.addCleanup(shutil.rmtree, d, True)
        unit = os.path.join(d, "fencegate.service")
        with open(unit, "w") as f:
            f.write(self.unit().replace(self.bindir + "/",
                                        self.staged(self.bindir) + "/"))
        r = subprocess.run([sa, "verify", unit], capture_output=True,
                           text=True, timeout=slack(60))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stderr.strip(), "")

        r = subprocess.run([sa, "security", "--offline=yes",
                            "--threshold=%d" % EXPOSURE_OK, unit],
                           capture_output=True, text=True, timeout=slack(60))
        m = re.search(r"Overall exposure level for fencegate.service: "
                      r"([0-9.]+) (\S+)", r.stdout)
        self.assertIsNotNone(m, r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, m.group(0))
        self.assertLessEqual(float(m.group(1)), EXPOSURE_OK / 10, m.group(0))
        self.assertIn(m.group(2), ("OK", "SAFE", "PERFECT"), m.group(0))
