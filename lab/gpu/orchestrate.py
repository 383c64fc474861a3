"""`python -m lab.gpu run` on the device machine: the carried packages unpacked, the tree and the declared range
checked, then each part in its own process group within its box and the run's deadline."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab import ROOT
from lab.gpu.common import (
    BOXES,
    DEADLINE,
    PARTS,
    SCHEMA,
    check_tree,
    load,
    machine_info,
    nvidia_smi,
    run_group,
    save,
    settings,
)
from lab.gpu.tables import summary

# --- the orchestrator: `python -m lab.gpu run` (what lab/gpu/gpu.sh runs) -------------------------------------------


def interpreter_tag() -> str:
    """This Python as the carried packages are built for: 'cp312 linux x86_64' on the device machine."""
    import platform

    return f"cp{sys.version_info.major}{sys.version_info.minor} {sys.platform} {platform.machine()}"


def unpack_site(archive: Path, dest: Path) -> dict:
    """The carried packages (`python -m lab.gpu.pack site`) unpacked into `dest` (on PYTHONPATH after the checkout)."""
    import tarfile

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(dest, filter="data")
    manifest = dest / "site.json"
    return json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else {}


def declared_range(setup_cfg: Path = ROOT / "setup.cfg") -> dict:
    """The Python and torch versions setup.cfg declares: `python_requires` and install_requires' torch."""
    import configparser

    from packaging.requirements import Requirement

    parser = configparser.ConfigParser()
    parser.read(setup_cfg, encoding="utf-8")
    options = parser["options"]
    lines = [line.strip() for line in options["install_requires"].splitlines()]
    torch_spec = next(
        str(Requirement(line).specifier) for line in lines if line and not line.startswith("#") and
        Requirement(line).name == "torch"
    )  # fmt: skip
    return {"python": options["python_requires"], "torch": torch_spec}


def versions_in_range(declared: dict, found: dict) -> dict:
    """{name: {found, declared, inside}} for the Python and torch `found` (their public versions, without a
    local tag such as +cu128, against the `declared` specifiers)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return {
        name: {
            "found": found[name],
            "declared": declared[name],
            "inside": SpecifierSet(declared[name]).contains(Version(found[name]).public, prereleases=True),
        }
        for name in ("python", "torch")
    }


def check_packages(args) -> int:
    """Imports what the parts need and prints, as one JSON line, the versions found and the requirements of
    spaCy, thinc, pydantic, confection and weasel that what is installed does not meet."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    found = {}
    for name in ("spacy", "thinc", "pydantic", "confection", "srsly", "blis", "cupy-cuda13x", "transformers", "torch"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    import confection  # noqa: F401
    import pydantic  # noqa: F401
    import spacy  # noqa: F401
    import thinc.api  # noqa: F401

    from spacy_elmo.spacy import component  # noqa: F401

    unmet = []
    for dist in ("spacy", "thinc", "pydantic", "confection", "weasel"):
        for line in metadata.requires(dist) or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            try:
                have = metadata.version(requirement.name)
            except metadata.PackageNotFoundError:
                unmet.append(f"{dist} needs {requirement}: missing")
                continue
            if requirement.specifier and not requirement.specifier.contains(have, prereleases=True):
                unmet.append(f"{dist} needs {requirement}: {have}")
    print(json.dumps({"versions": found, "unmet": unmet}))
    return 0


def orchestrate(args) -> int:
    out, prep = Path(args.out), Path(args.prep)
    out.mkdir(parents=True, exist_ok=True)
    begun = time.monotonic()
    deadline = args.deadline if args.deadline is not None else (None if args.quick else DEADLINE)
    parts = [p for p in (args.parts.split(",") if args.parts else PARTS) if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise SystemExit(f"lab.gpu: unknown part(s) {', '.join(unknown)} (expected some of {', '.join(PARTS)})")
    record = load(out) if args.parts else {}
    stamp_path = prep / "stamp.json"
    stamp = json.loads(stamp_path.read_text(encoding="utf-8")) if stamp_path.is_file() else {}
    from spacy_elmo.provenance import utc_now

    runs = record.setdefault("runs", [])
    runs.append({"started_utc": utc_now(), "parts": parts, "argv": sys.argv[1:]})
    record.update(
        schema=SCHEMA,
        kind="gpu",
        quick=args.quick,
        commit=stamp.get("commit"),
        dirty=stamp.get("dirty", []),
        left_behind=stamp.get("left_behind", []),
        stamped_utc=stamp.get("stamped_utc"),
        tree=check_tree(stamp) if stamp else {"same": None, "note": f"no {stamp_path.name}: commit unknown"},
    )
    tree = record["tree"]
    print(f"lab.gpu: commit {record['commit']} (stamped {record['stamped_utc']}); tree as stamped: {tree['same']}")
    if tree.get("differ") or tree.get("missing"):
        print(f"lab.gpu: the tree differs from the stamp: {tree['differ'][:5]}, missing {tree['missing'][:5]}")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    paths = [str(ROOT)]
    archive, sidecar = prep / "site.tar.xz", prep / "site.json"
    built_for = json.loads(sidecar.read_text(encoding="utf-8")).get("python") if sidecar.is_file() else None
    if archive.is_file() and built_for != interpreter_tag():
        record["site"] = {"archive": None, "note": f"site.tar.xz is for {built_for}, this is {interpreter_tag()}"}
    elif archive.is_file():
        site = Path(tempfile.gettempdir()) / "spacy_elmo_gpu_site"
        started = time.perf_counter()
        manifest = unpack_site(archive, site)
        paths.append(str(site))
        record["site"] = {"archive": "site.tar.xz", "seconds": round(time.perf_counter() - started, 1), **manifest}
    else:
        record["site"] = {"archive": None, "note": "no site.tar.xz: the environment's own packages"}
    env["PYTHONPATH"] = os.pathsep.join(paths + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    check = subprocess.run(
        [sys.executable, "-m", "lab.gpu", "check-packages"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if check.returncode == 0:
        record["site"]["check"] = json.loads(check.stdout.strip().splitlines()[-1])
    else:
        tail = [x for x in check.stderr.strip().splitlines() if x.strip()][-1:]
        record["site"]["check"] = {"error": tail[0] if tail else f"exit {check.returncode}"}
    print(f"lab.gpu: packages: {json.dumps(record['site'].get('check'))}", flush=True)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("lab.gpu: --device cuda, but torch sees no CUDA device (use --device cpu --quick for a check)")
    record["machine"] = machine_info(args.device)
    import platform

    record["range"] = versions_in_range(
        declared_range(), {"python": platform.python_version(), "torch": torch.__version__}
    )
    outside = [f"{n} {v['found']} (setup.cfg: {v['declared']})" for n, v in record["range"].items() if not v["inside"]]
    if outside:  # what users install could not be this: the run would measure something else
        save(out, record)
        raise SystemExit(f"lab.gpu: outside the range setup.cfg declares: {', '.join(outside)}; no part run")
    print(f"lab.gpu: inside the declared range: {json.dumps(record['range'])}", flush=True)
    for name, version in (record["site"]["check"].get("versions") or {}).items():
        if name in record["machine"]:  # this process does not have the carried packages on its path
            record["machine"][name] = version
    record["settings"] = settings(args.quick, args.device)
    record["settings"]["boxes"] = BOXES
    record["settings"]["deadline"] = deadline
    record.setdefault("parts", {})
    record.setdefault("status", {})
    save(out, record)
    for part in parts:
        box = BOXES[part] * (4 if args.quick else 1)  # a shared CPU is slow; the quick settings are small
        if deadline is not None:
            box = min(box, deadline - (time.monotonic() - begun))
        if box < 5:
            status = {"skipped": "the run's deadline"}
        else:
            started = time.perf_counter()
            command = [sys.executable, "-m", "lab.gpu", "part", part, "--out", str(out), "--prep", str(prep)]
            command += ["--device", args.device, "--box", f"{box:.0f}"] + (["--quick"] if args.quick else [])
            rc = run_group(command, env, timeout=box + 20)
            status = {"exit": rc} if rc is not None else {"exit": None, "timed_out": True}
            status.update(seconds=round(time.perf_counter() - started, 1), box=round(box))
        record = load(out)
        record["status"][part] = status
        save(out, record)
        print(f"lab.gpu: part {part}: {status}", flush=True)
    record = load(out)
    record["runs"][-1]["ended_utc"] = utc_now()
    record["finished_utc"] = utc_now()
    if args.device == "cuda":
        record["machine"]["nvidia_smi_end"] = nvidia_smi()
    save(out, record)
    print("\n" + summary(record), flush=True)
    extra = [p.name for p in out.iterdir()]
    if len(extra) > 8:
        print(f"lab.gpu: {len(extra)} files under OUT; the device tool returns 8: {sorted(extra)}")
    return 0
