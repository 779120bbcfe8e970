"""`metagen.serve`: the OpenAI-compatible API of `metagen serve`, in a child process until it is stopped."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from metagen._args import expect

__all__ = ["serve"]

log = logging.getLogger(__name__)


def serve(host: str = "127.0.0.1", port: int = 8000, *, workflows_dir: str | Path | None = None,
          trace_db: str | Path | None = None, api_key: str | None = None, dry_run: bool = False) -> int:
    """Serve every workflow of the workflows folder as an OpenAI-compatible model on http://HOST:PORT/v1 and block
    until it stops (Ctrl+C, or interrupting the notebook cell, stops it). It is `metagen serve` in a child process,
    so a notebook's own event loop is left alone. Returns its exit code; RuntimeError when it could not start.

    Example:
        >>> metagen.serve("127.0.0.1", 8000)   # doctest: +SKIP
        >>> # then: openai.OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="-").chat.completions.create(
        >>> #           model="self_consistency", messages=[{"role": "user", "content": "What is 3 + 4?"}])
    """
    expect("host", host, str, "an address such as '127.0.0.1'")
    expect("port", port, int, "a port number")
    if not 0 < port < 65536:
        raise ValueError(f"port must be between 1 and 65535, got {port}")
    expect("dry_run", dry_run, bool, "True or False")
    command = [sys.executable, "-m", "app.cli", "serve", "--host", host, "--port", str(port)]
    for flag, value in (("--workflows", workflows_dir), ("--db", trace_db)):
        if value is not None:
            expect(flag.strip("-"), value, (str, Path), "a path or None")
            command += [flag, str(Path(value).expanduser())]
    if api_key is not None:
        expect("api_key", api_key, str, "a key (str) or None")
        command += ["--api-key", api_key]
    if dry_run:
        command.append("--dry-run")
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:  # its own lines (address, rules) where the caller reads them
            said = [*said[-19:], line]
            sys.stderr.write(line)
        code = process.wait()
    except KeyboardInterrupt:
        process.terminate()
        code = process.wait()
        log.info("metagen serve stopped")
        return code
    if code not in (0, -2, 130):
        raise RuntimeError(f"metagen serve could not run (exit code {code}): {''.join(said[-3:]).strip()}")
    return code
