"""The build's scratch folders outside the source tree: everything else is in setup.cfg.

pip builds a local project in place, and setuptools writes build/ and spacy_elmo.egg-info/ beside the
sources, so `pip install .` would leave them in the clone (and a stale build/lib can ship a deleted
module in the next wheel). setup.cfg cannot name a folder created per build, so each setuptools run
gets a fresh temporary one here, removed when the run ends (the wheel or sdist is written elsewhere
by then).
"""

import atexit
import shutil
import tempfile

from setuptools import setup

scratch = tempfile.mkdtemp(prefix="spacy_elmo-build-")
atexit.register(shutil.rmtree, scratch, ignore_errors=True)
setup(options={"build": {"build_base": f"{scratch}/build"}, "egg_info": {"egg_base": scratch}})
