"""The checks of `metagen doctor`: each a small function returning {name, status, detail, fix}, never raising."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from backends.llama.build_facts import CANARY_TIMEOUT_S, cpu_flags, read_build_record, run_canary, signal_name

OK, WARN, PROBLEM = "ok", "warn", "problem"
STATUSES = (OK, WARN, PROBLEM)

PACKAGE = "metagen-studio"
SETUP_FIX = "run `make setup` in the repository (or `pip install -e .` in your environment)"
REBUILD_FIX = ("rebuild the engine for this CPU: `rm -rf .venv && make setup` (builds without llama.cpp's AMX kernels "
               "unless METAGEN_AMX=1, keyed on this CPU's features)")
CHROMIUM = "/usr/bin/chromium"
MIN_FREE_BYTES = 1 << 30
LOW_FREE_BYTES = 5 << 30
AMX_OPT_IN_ENV = "METAGEN_AMX"

CPU_FEATURES = {
    "SSE3": ("pni", "sse3"), "SSSE3": ("ssse3",), "AVX": ("avx",), "AVX2": ("avx2",), "F16C": ("f16c",),
    "FMA": ("fma",), "BMI2": ("bmi2",), "AVX_VNNI": ("avx_vnni",), "AVX512": ("avx512f",),
    "AVX512_VBMI": ("avx512vbmi",), "AVX512_VNNI": ("avx512_vnni", "avx512vnni"),
    "AVX512_BF16": ("avx512_bf16",), "AMX_INT8": ("amx_int8",),
}
"""llama_print_system_info's x86 feature names -> the /proc/cpuinfo flags that mean the CPU has them."""

SYSTEM_INFO_SNIPPET = ("import llama_cpp; llama_cpp.llama_backend_init(); "
                       "print((llama_cpp.llama_print_system_info() or b'').decode(errors='replace').strip()); "
                       "print('GPU_OFFLOAD =', int(bool(llama_cpp.llama_supports_gpu_offload()))); "
                       "print('VERSION =', getattr(llama_cpp, '__version__', 'unknown'))")
"""Run in a child process: a broken build may crash on import, and the doctor must still report."""


def check(name: str, status: str, detail: str, fix: str = "") -> dict[str, str]:
    """One check's result; `fix` says what to do (empty when nothing needs doing)."""
    assert status in STATUSES, status
    return {"name": name, "status": status, "detail": detail, "fix": fix}


def gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


# ---------------------------------------------------------------------------------------------- Python, packages


def check_python() -> dict[str, str]:
    version = platform.python_version()
    where = f"Python {version} ({sys.executable})"
    if sys.version_info < (3, 10):  # noqa: UP036 (an install made with an older Python must hear why)
        return check("Python", PROBLEM, where + ": Metagen needs 3.10 or later", "install Python 3.10+ and run "
                     "`make setup` with it (PYTHON=python3.12 make setup)")
    return check("Python", OK, where)


def _requirement_name(text: str) -> str | None:
    """The distribution name of a core requirement line, None for one behind an extra or a marker."""
    if ";" in text:
        return None
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
    return match.group(1) if match else None


def check_packages() -> dict[str, str]:
    """The app and its core dependencies installed, with their versions."""
    try:
        app_version = importlib.metadata.version(PACKAGE)
        requirements = importlib.metadata.requires(PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        return check("packages", PROBLEM, f"{PACKAGE} is not installed in this environment ({sys.prefix})",
                     SETUP_FIX)
    found, missing = [], []
    for line in requirements:
        name = _requirement_name(line)
        if not name:
            continue
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    detail = f"{PACKAGE} {app_version}; " + ", ".join(found)
    if missing:
        return check("packages", PROBLEM, f"missing: {', '.join(missing)} ({detail})", SETUP_FIX)
    return check("packages", OK, detail)


# ---------------------------------------------------------------------------------------------- the engine build


def build_features(system_info: str) -> set[str]:
    """The features a llama.cpp build was compiled with ('AVX2 = 1' in llama_print_system_info)."""
    return {name for name, value in re.findall(r"\b([A-Z][A-Z0-9_]*) = (\d+)", system_info) if value == "1"}


def compare_build(system_info: str, flags: set[str], amx_opt_in: bool) -> dict[str, str]:
    """The engine build's CPU features against this CPU's: AMX kernels (they segfault on Sapphire Rapids and later:
    llama.cpp issue #20824) unless opted in, and any feature this CPU lacks (SIGILL on the first decode)."""
    built = build_features(system_info)
    shown = " ".join(sorted(f for f in built if f in CPU_FEATURES)) or "none of the x86 extensions"
    if not flags:
        return check("engine build", OK, f"built with {shown}; this CPU's features are unknown (no /proc/cpuinfo)")
    lacking = sorted(f for f in built if f in CPU_FEATURES and not any(flag in flags for flag in CPU_FEATURES[f]))
    if lacking:
        return check("engine build", PROBLEM,
                     f"llama-cpp-python was built for CPU features this CPU lacks: {', '.join(lacking)} (it stops "
                     f"with SIGILL or SIGSEGV on the first decode)", REBUILD_FIX)
    if "AMX_INT8" in built:
        if amx_opt_in:
            return check("engine build", WARN, f"built with llama.cpp's AMX kernels ({AMX_OPT_IN_ENV}=1): they "
                         f"segfault on some Xeons (llama.cpp issue #20824); features {shown}",
                         f"if decoding crashes, rebuild without them: unset {AMX_OPT_IN_ENV}, then "
                         "`rm -rf .venv && make setup`")
        return check("engine build", PROBLEM, "llama-cpp-python was built with llama.cpp's AMX kernels on a CPU "
                     "with AMX: its matrix multiply segfaults there (llama.cpp issue #20824)", REBUILD_FIX)
    return check("engine build", OK, f"built with {shown}; this CPU has all of them"
                 + ("" if "amx_int8" not in flags else " (AMX left out, as it should be)"))


def engine_system_info(timeout_s: float = 120.0) -> tuple[str, str]:
    """(llama_print_system_info and build facts, error) read in a child process."""
    try:
        done = subprocess.run([sys.executable, "-c", SYSTEM_INFO_SNIPPET], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return "", f"importing llama_cpp did not finish in {timeout_s:g} s"
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return "", f"importing llama_cpp failed ({signal_name(done.returncode)}): {tail}"
    return done.stdout.strip(), ""


def check_engine_build(system_info: str, error: str = "", cpuinfo: str | None = None) -> dict[str, str]:
    if error:
        return check("engine build", PROBLEM, error, REBUILD_FIX)
    result = compare_build(system_info, cpu_flags(cpuinfo), os.environ.get(AMX_OPT_IN_ENV, "") == "1")
    record = read_build_record()
    version = re.search(r"VERSION = (\S+)", system_info)
    facts = [f"llama-cpp-python {version.group(1)}" if version else "",
             f"build {record['key']}" if record.get("key") else "not built by `make setup`",
             "portable (GGML_NATIVE=OFF)" if record.get("portable") else ""]
    result["detail"] = "; ".join(f for f in facts if f) + "; " + result["detail"]
    return result


def check_gpu(system_info: str, driver: str) -> dict[str, str]:
    """The build's GPU backend against the machine's driver."""
    upper = system_info.upper()
    backend = next((b for b in ("CUDA", "VULKAN", "METAL") if b in upper), "")
    if backend == "CUDA" and not driver:
        return check("GPU", PROBLEM, "llama-cpp-python was built with CUDA but no NVIDIA driver answers "
                     "(nvidia-smi is missing or sees no GPU)", "install the NVIDIA driver, or rebuild for the "
                     "CPU: `METAGEN_GPU=cpu make setup` after `rm -rf .venv`")
    if backend:
        return check("GPU", OK, f"{backend} build" + (f"; {driver}" if driver else ""))
    if driver:
        return check("GPU", WARN, f"CPU-only build, but this machine has a GPU ({driver})",
                     "for GPU offload install the CUDA toolkit (nvcc) and run `METAGEN_GPU=cuda make setup` after "
                     "`rm -rf .venv` (docs/gpu.md)")
    return check("GPU", OK, "CPU-only build; no NVIDIA driver here")


def check_canary(command: list[str] | None = None, timeout_s: float = CANARY_TIMEOUT_S) -> dict[str, str]:
    """Decodes a few tokens of the bundled model in a child process (backends/llama/canary.py), with its tokens/s."""
    outcome = run_canary(command, timeout_s)
    if outcome.ok:
        return check("canary decode", OK, outcome.sentence)
    if outcome.failure == "timeout":
        return check("canary decode", PROBLEM, outcome.sentence, "check what else loads this machine; then "
                     + REBUILD_FIX)
    if outcome.failure == "start":
        return check("canary decode", PROBLEM, outcome.sentence, SETUP_FIX)
    return check("canary decode", PROBLEM, outcome.sentence, REBUILD_FIX + "; if it still fails, `CMAKE_ARGS="
                 "'-DGGML_NATIVE=OFF' make setup` builds a portable engine")


# ---------------------------------------------------------------------------------------------- files and disk


def check_models(folder: Path) -> dict[str, str]:
    """The models folder: its GGUF files and sizes, invalid ones, leftover `.part` downloads; the bundled model."""
    from backends.base import ModelFileError
    from backends.llama.models.bundled import bundled_model_path
    from backends.llama.models.gguf import find_model_files, read_gguf_header
    from backends.llama.models.hub_transfer import PART_SUFFIX

    problems: list[str] = []
    try:
        bundled = f"bundled model {bundled_model_path().name}"
    except ModelFileError as exc:
        bundled = ""
        problems.append(str(exc))
    files = find_model_files(folder)
    invalid = []
    for path in files:
        try:
            read_gguf_header(path)
        except (ModelFileError, OSError, ValueError) as exc:
            invalid.append(f"{path.name} ({exc})")
    parts = sorted(p for p in folder.rglob(f"*{PART_SUFFIX}") if p.is_file()) if folder.is_dir() else []
    total = sum(p.stat().st_size for p in files)
    detail = (f"{folder}: {len(files)} model file(s), {gib(total)}" if folder.is_dir() else
              f"{folder} does not exist yet (it is made when you pull a model)")
    detail = "; ".join(d for d in (detail, bundled) if d)
    unfinished = f"unfinished downloads: {', '.join(f'{p.name} ({gib(p.stat().st_size)})' for p in parts)}"
    resume = "`metagen models pull REPO[:QUANT]` resumes a download; or delete the .part files"
    if invalid or problems:  # the .part files are still named: one problem must not hide another
        named = ", ".join(invalid)
        return check("models", PROBLEM, "; ".join([detail, *problems] + ([f"not valid GGUF: {named}"] if invalid
                                                                       else []) + ([unfinished] if parts else [])),
                     "; ".join([f"delete or download again: {', '.join(p.split(' (')[0] for p in invalid)}"
                                if invalid else SETUP_FIX] + ([resume] if parts else [])))
    if parts:
        return check("models", WARN, f"{detail}; {unfinished}", resume)
    return check("models", OK, detail)


def broken_models(pool: Any) -> list[str]:
    """What the pool marked broken (its `broken()`, when it has one), as 'name: reason' lines."""
    listing = getattr(pool, "broken", None) if pool is not None else None
    if not callable(listing):
        return []
    found = listing() or []
    items: Iterable[Any] = found.items() if isinstance(found, dict) else found
    lines = []
    for item in items:
        if isinstance(item, dict):
            name = item.get("name") or item.get("model") or item.get("key") or "?"
            lines.append(f"{name}: {item.get('reason', '')}".rstrip(": "))
        elif isinstance(item, tuple | list) and len(item) == 2:
            lines.append(f"{item[0]}: {item[1]}")
        else:
            lines.append(str(item))
    return lines


def check_broken_models(pool: Any) -> dict[str, str] | None:
    """Models whose engine crashed again and again (None where the pool keeps no such list)."""
    if pool is None or not callable(getattr(pool, "broken", None)):
        return None
    lines = broken_models(pool)
    if not lines:
        return check("broken models", OK, "none")
    return check("broken models", PROBLEM, "; ".join(lines), "the model file or the engine build is at fault: "
                 "try the model again after fixing the other problems here, or remove it from the models folder")


def check_engine_stops(pool: Any) -> dict[str, str] | None:
    """How each loaded model's engine worker last stopped, with its last words on stderr (a GGML_ASSERT, an
    out-of-memory line); None where the pool keeps no such record or nothing stopped."""
    listing = getattr(pool, "stops", None) if pool is not None else None
    found = listing() if callable(listing) else {}
    if not found:
        return None
    return check("engine stops", WARN, "; ".join(f"{name}: {why}" for name, why in found.items()),
                 "a stop that repeats marks the model broken: the line the engine wrote says why (a failed "
                 "assertion or out-of-memory points at the build or the model's size; see `broken models`)")


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(folders: dict[str, Path]) -> dict[str, str]:
    """Free space where the data, models and traces live."""
    seen, lines, worst = set(), [], OK
    for label, folder in folders.items():
        where = _existing(folder)
        try:
            usage = shutil.disk_usage(where)
            device = where.stat().st_dev
        except OSError as exc:
            lines.append(f"{label}: cannot read ({exc})")
            continue
        if device in seen:
            continue
        seen.add(device)
        lines.append(f"{label} ({where}): {gib(usage.free)} free of {gib(usage.total)}")
        if usage.free < MIN_FREE_BYTES:
            worst = PROBLEM
        elif usage.free < LOW_FREE_BYTES and worst == OK:
            worst = WARN
    fix = "" if worst == OK else "free disk space (models are several GB each; the trace database grows with runs)"
    return check("disk space", worst, "; ".join(lines), fix)


# ---------------------------------------------------------------------------------------------- the rest


def check_isolation() -> dict[str, str]:
    """Code isolation for the code verifiers: bubblewrap found by absolute path and working, or why not."""
    from nodes.algorithms.code_exec import isolation_probe

    works, why = isolation_probe()
    if works:
        return check("code isolation", OK, why)
    return check("code isolation", WARN, f"{why}: candidate code runs with limits only (CPU, memory, files, "
                 "processes), able to read your files and reach the network",
                 "install bubblewrap (`sudo apt-get install bubblewrap`; in a container, allow user namespaces); "
                 "see docs/security.md")


def check_chromium(path: str = CHROMIUM) -> dict[str, str]:
    if os.access(path, os.X_OK):
        return check("Chromium", OK, f"{path} (the browser tests use it)")
    return check("Chromium", WARN, f"{path} not found: the browser tests (tests/e2e) cannot run; the app itself "
                 "does not need it", "`make system-deps` (installs chromium with apt)")


HUB_PROBE_TIMEOUT_S = 4.0


def hub_reachable(endpoint: str) -> str | None:
    """None when the Hub at `endpoint` answers (any HTTP status below 500), else why not, in a few words."""
    import httpx

    try:
        answer = httpx.get(endpoint.rstrip("/") + "/api/models", params={"limit": 1}, timeout=HUB_PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if answer.status_code < 500 else f"it answered HTTP {answer.status_code}"


def check_hub_env(env: dict[str, str] | None = None,
                  reach: Callable[[str], str | None] | None = None) -> dict[str, str]:
    """HF_ENDPOINT, whether a Hub token is set (never its value), offline mode, and whether the Hub answers (unless
    offline: `reach`, by default one short request)."""
    env = dict(os.environ) if env is None else env
    endpoint = env.get("HF_ENDPOINT", "")
    token = any(env.get(k) for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"))
    offline = env.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    detail = (f"HF_ENDPOINT={endpoint}" if endpoint else "HF_ENDPOINT not set (huggingface.co)") + \
        f"; HF_TOKEN {'set' if token else 'not set (gated models need one)'}" + \
        ("; HF_HUB_OFFLINE: offline, pulls from the Hub are off" if offline else "")
    if endpoint and not re.match(r"https?://[^\s/]+", endpoint):
        return check("Hugging Face Hub", WARN, detail + ": not an http(s) URL",
                     "set HF_ENDPOINT to a URL such as https://huggingface.co, or unset it")
    if not offline:
        url = endpoint or "https://huggingface.co"
        why = (reach or hub_reachable)(url)
        if why:
            return check("Hugging Face Hub", WARN, f"{detail}; {url} cannot be reached ({why}): pulls from the Hub "
                         "fail until it can", "check the network or proxy, or work offline: set HF_HUB_OFFLINE=1 and "
                         "put GGUF files into the models folder (`metagen models list` shows them)")
    return check("Hugging Face Hub", OK, detail + ("" if offline else "; the Hub answers"))


def check_traces(path: Path) -> dict[str, str]:
    """The trace database's integrity: PRAGMA quick_check (which changes nothing)."""
    if not path.exists():
        return check("trace database", OK, f"{path} not created yet (the first run makes it)")
    fix = (f"stop the studio, move the file aside (`mv {path} {path}.bad`); the next start makes a new one "
           "(runs in the old file are lost; `sqlite3 FILE .recover` may save some)")
    try:
        # read-write but writing nothing: a read-only connection to a WAL database leaves -wal / -shm files behind
        with sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=10) as db:
            rows = [r[0] for r in db.execute("PRAGMA quick_check").fetchall()]
        db.close()
    except sqlite3.Error as exc:
        return check("trace database", PROBLEM, f"{path}: {exc}", fix)
    if rows == ["ok"]:
        return check("trace database", OK, f"{path} ({gib(path.stat().st_size)}): quick_check ok")
    return check("trace database", PROBLEM, f"{path}: quick_check found {len(rows)} problem(s): "
                 + "; ".join(rows[:3]), fix)
