"""test_pip.py - `pip install --no-deps --no-build-isolation --target DIR
clients/python` works without a network and the package imports from
there."""

import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else None


class TestPipInstall(unittest.TestCase):
    def test_install_and_import(self):
        self.assertIsNotNone(PY, "Debian's /usr/bin/python3 is needed")
        tmp = tempfile.mkdtemp(prefix="fg-pip-",
                               dir=os.environ.get("FG_TEST_TMP"))
        self.addCleanup(shutil.rmtree, tmp, True)
        # a copy, so that the build's own files stay out of the tree
        src = os.path.join(tmp, "src")
        shutil.copytree(SRC, src, ignore=shutil.ignore_patterns(
            "__pycache__", "build", "*.egg-info"))
        target = os.path.join(tmp, "target")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONPATH", None)
        r = subprocess.run([PY, "-m", "pip", "install", "--no-deps",
                            "--no-build-isolation", "--target", target, src],
                           capture_output=True, text=True, env=env,
                           timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(os.path.exists(os.path.join(target, "fencegate",
                                                    "py.typed")))
        env["PYTHONPATH"] = target
        r = subprocess.run([PY, "-c", "import fencegate, fencegate.aio, "
                            "fencegate.integrations; "
                            "print(fencegate.__file__)"],
                           capture_output=True, text=True, env=env,
                           cwd=tmp, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.strip().startswith(target), r.stdout)
