"""Builds llama-cpp-python for this machine, keyed on its flags, and proves it runs with a canary decode.

Run by `make setup` with the virtual environment's Python (stdlib only until the canary):

    python scripts/build_engine.py [--version 0.3.36] [--force]

- AMX kernels are left out unless METAGEN_AMX=1: llama.cpp's AMX matrix multiply segfaults on some Xeon CPUs
  (Sapphire Rapids and later, upstream llama.cpp issue #20824). Every other native feature stays (AVX-512, VNNI, BF16).
- The wheel is built with pip's cache off and kept in a folder named by a hash of everything that shapes it
  (version, CMake arguments, compiler flags, the CPU's features, the GPU backend): a wheel of other flags, a cached
  crashing one included, is never reused.
- After installing, a child process decodes a few tokens of the bundled model. A crash or garbage output fails the
  setup with what happened and what to do; when the flags were chosen automatically, the engine is rebuilt once
  with a portable set (GGML_NATIVE=OFF, AVX2) and checked again.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType


def _build_facts() -> ModuleType:
    """backends/llama/build_facts.py loaded by path: this script runs before the app is installed, and loading the
    one module (not the `backends` package) keeps it to the standard library."""
    path = Path(__file__).resolve().parent.parent / "backends" / "llama" / "build_facts.py"
    spec = importlib.util.spec_from_file_location("metagen_build_facts", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would
    spec.loader.exec_module(module)
    return module


facts = _build_facts()

DEFAULT_VERSION = "0.3.36"
NO_AMX_FLAGS = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
PORTABLE_CMAKE = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
GPU_CMAKE = {"cuda": "-DGGML_CUDA=on", "vulkan": "-DGGML_VULKAN=on", "metal": "-DGGML_METAL=on"}


def say(message: str) -> None:
    print(f"[build_engine] {message}", flush=True)


def compiler_accepts(flags: str) -> bool:
    """Whether the C compiler knows these flags (an old GCC or a non-x86 clang does not know -mno-amx-*)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        return False
    try:
        probe = subprocess.run([compiler, *shlex.split(flags), "-x", "c", "-E", "-"], input="", text=True,
                               capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def detect_gpu() -> str:
    """cuda when nvcc is on PATH and a driver sees a GPU (nvidia-smi, within its timeout), else the CPU build
    (METAGEN_GPU overrides)."""
    chosen = os.environ.get("METAGEN_GPU", "").strip().lower()
    if chosen:
        return "" if chosen == "cpu" else chosen
    return "cuda" if shutil.which("nvcc") and facts.gpu_driver() else ""


def build_config(portable: bool) -> dict:
    """The CMake arguments and compiler flags of this build, and whether they were chosen automatically."""
    user_cmake = os.environ.get("CMAKE_ARGS", "").strip()
    gpu = detect_gpu()
    if gpu and gpu not in GPU_CMAKE:
        raise SystemExit(f"METAGEN_GPU={gpu}: use cuda, vulkan, metal or cpu")
    cmake = " ".join(part for part in (GPU_CMAKE.get(gpu, ""), user_cmake) if part)
    if portable:
        cmake = " ".join(part for part in (PORTABLE_CMAKE, cmake) if part)
    amx = os.environ.get("METAGEN_AMX", "") == "1"
    cflags = ""
    if not amx and platform.machine().lower() in ("x86_64", "amd64") and compiler_accepts(NO_AMX_FLAGS):
        cflags = NO_AMX_FLAGS
    return {"cmake_args": cmake, "cflags": cflags, "amx": amx, "gpu": gpu or "cpu", "portable": portable,
            "automatic": not user_cmake}


def build_key(version: str, config: dict) -> str:
    shape = json.dumps({"version": version, "python": sys.version.split()[0], "cpu": facts.cpu_signature(),
                        "machine": platform.machine(), **config}, sort_keys=True)
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


def wheel_dir(key: str) -> Path:
    base = Path(os.environ.get("METAGEN_WHEEL_CACHE", Path.home() / ".cache" / "metagen" / "llama-wheels"))
    return base / key


def build_wheel(version: str, config: dict, target: Path) -> Path:
    """pip wheel with its cache off into a scratch folder, moved into place only once complete."""
    existing = sorted(target.glob("llama_cpp_python-*.whl")) if target.is_dir() else []
    if existing:
        say(f"reusing the wheel built with these exact flags: {existing[0]}")
        return existing[0]
    scratch = target.with_name(target.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    env = dict(os.environ, CMAKE_ARGS=config["cmake_args"])
    if config["cflags"]:
        env["CFLAGS"] = (env.get("CFLAGS", "") + " " + config["cflags"]).strip()
        env["CXXFLAGS"] = (env.get("CXXFLAGS", "") + " " + config["cflags"]).strip()
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    say(f"building llama-cpp-python {version} (CMAKE_ARGS={config['cmake_args'] or '(none)'}, "
        f"CFLAGS={config['cflags'] or '(none)'}); this takes about 5 minutes on 2 cores")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary",
                    "llama-cpp-python", "-w", str(scratch), f"llama-cpp-python=={version}"], env=env, check=True)
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
    return sorted(target.glob("llama_cpp_python-*.whl"))[0]


def installed_key(venv: Path) -> str:
    """The build key of the installed llama-cpp-python: the recorded one, if pip still has that very wheel
    installed (a later `pip install llama-cpp-python` of other flags leaves the record behind)."""
    key = str(facts.read_build_record(venv).get("key", ""))
    try:
        from importlib.metadata import distribution

        origin = distribution("llama-cpp-python").read_text("direct_url.json") or ""
    except (OSError, ValueError, ImportError):
        return ""
    return key if key and f"/{key}/" in origin else ""


def native_failed(venv: Path) -> str:
    """The key of a native build whose canary crashed here (then the portable build is kept)."""
    return str(facts.read_build_record(venv).get("native_failed", ""))


def remember_native_failed(venv: Path, key: str) -> None:
    facts.write_build_record({**facts.read_build_record(venv), "native_failed": key}, venv)


def install(version: str, config: dict, venv: Path, force: bool) -> None:
    key = build_key(version, config)
    if not force and installed_key(venv) == key:
        say(f"llama-cpp-python {version} is installed with these flags (build {key})")
        return
    wheel = build_wheel(version, config, wheel_dir(key))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--force-reinstall", "--no-cache-dir",
                    str(wheel)], check=True)
    facts.write_build_record({"key": key, "version": version, **config}, venv)
    say(f"installed {wheel.name} (build {key})")


def canary() -> tuple[bool, str]:
    """Decodes a few tokens of the bundled model in a child process: (ok, what happened). The child's command is
    build_facts.canary_command() ($METAGEN_CANARY_COMMAND replaces it, e.g. in the tests of a broken build)."""
    outcome = facts.run_canary()
    return outcome.ok, outcome.sentence


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=os.environ.get("METAGEN_LLAMA_VERSION", DEFAULT_VERSION))
    parser.add_argument("--force", action="store_true", help="rebuild even when the installed build matches")
    parser.add_argument("--canary-only", action="store_true", help="only run the canary decode")
    parser.add_argument("--no-canary", action="store_true", help="build and install only (before the app is)")
    args = parser.parse_args(argv)
    venv = Path(sys.prefix)
    native = build_config(portable=False)
    portable_already = native["automatic"] and native_failed(venv) == build_key(args.version, native)
    config = build_config(portable=True) if portable_already else native
    if portable_already:
        say("the native build crashed here before: keeping the portable build")
    if not args.canary_only:
        install(args.version, config, venv, args.force)
    if args.no_canary:
        return 0
    ok, report = canary()
    if ok:
        say(f"canary: {report}")
        return 0
    say(f"canary FAILED: {report}")
    if args.canary_only or not config["automatic"] or config["portable"]:
        say("fix: run `make setup` again after `rm -rf .venv`; if it fails again, set CMAKE_ARGS='-DGGML_NATIVE=OFF' "
            "(a portable build) or report the message above; `metagen doctor` says more")
        return 1
    say("the build with this CPU's native features does not run here: rebuilding once with a portable set "
        f"({PORTABLE_CMAKE})")
    install(args.version, build_config(portable=True), venv, force=True)
    remember_native_failed(venv, build_key(args.version, native))
    ok, report = canary()
    if ok:
        say(f"canary after the portable rebuild: {report}")
        say("note: this install uses the portable build (AVX2); the native build crashed on this CPU")
        return 0
    say(f"canary FAILED again with the portable build: {report}")
    say("fix: report this with `metagen doctor --json`; the engine cannot decode on this machine as built")
    return 1


if __name__ == "__main__":
    sys.exit(main())
