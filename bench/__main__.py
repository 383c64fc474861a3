import os
import sys

# OpenMP's wait policy is read once, when torch loads libgomp, so it is settled before anything
# imports torch.  On a shared (oversubscribed) machine the default spin-waiting makes every
# parallel region wait for a descheduled thread (10x slower on the 2-core development box);
# `--omp-wait-policy default` measures with the environment's own setting.
for i, arg in enumerate(sys.argv):
    if arg.startswith("--omp-wait-policy"):
        value = arg.split("=", 1)[1] if "=" in arg else (sys.argv[i + 1] if i + 1 < len(sys.argv) else "")
        break
else:
    value = "passive"
if value.lower() in ("passive", "active"):
    os.environ["OMP_WAIT_POLICY"] = value.upper()

from .run import main  # noqa: E402

raise SystemExit(main())
