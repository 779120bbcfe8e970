"""What every confined program shares: its settings (JSON), its result channel and request, its uid and limits, and
the few helpers both the supervisor and the harness use (`Channel.emit`, `short`, `error_text`, `calls_check`).

Standard library only: it runs inside the sandbox as a file beside the programs (`python -I -S supervisor.py`),
where the studio's packages are not importable.
"""

from __future__ import annotations

import ast
import json
import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: every confined program would pay for it
if TYPE_CHECKING:
    from typing import IO, Any

SETTINGS_ENV = "METAGEN_SANDBOX"
"""The program's settings, a JSON object (`Settings.to_json`), set by code_exec.run_confined."""
RESULT_FD_ENV = "METAGEN_RESULT_FD"
"""The file descriptor the program writes its JSON event lines to."""
REFUSED_EXIT = 3
"""Exit status of a program whose settings or limits were refused (it never ran any candidate code)."""


class SettingsError(ValueError):
    """The settings string is not what code_exec writes: the program refuses to start."""


class Settings:
    """What the sandbox tells a program about its confinement."""

    __slots__ = ("isolated", "memory_mb", "processes", "uid")
    FIELDS = ("uid", "memory_mb", "processes", "isolated")

    def __init__(self, uid: int | None = None, memory_mb: int = 0, processes: int = 32,
                 isolated: bool = False) -> None:
        self.uid = uid
        """The throw-away uid to drop to (root under bubblewrap only), None to stay."""
        self.memory_mb = memory_mb
        """Address space of each process, set after dropping to the uid (under bubblewrap only)."""
        self.processes = processes
        """Processes (threads included) the uid may have at once (under bubblewrap only)."""
        self.isolated = isolated
        """Under bubblewrap: the program itself sets the uid and the last limits (bwrap needed more to start)."""

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.FIELDS}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.as_dict().values()))

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items()) + ")"

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Settings:
        """The settings `to_json` wrote; anything else raises SettingsError saying what is wrong."""
        example = cls(None, 512, 32, True).to_json()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SettingsError(f"{SETTINGS_ENV} is not JSON ({exc}); expected an object like {example}") from exc
        if not isinstance(data, dict):
            raise SettingsError(f"{SETTINGS_ENV} is a {type(data).__name__}, not an object like {example}")
        missing, unknown = set(cls.FIELDS) - set(data), set(data) - set(cls.FIELDS)
        if missing or unknown:
            raise SettingsError(f"{SETTINGS_ENV} lacks {sorted(missing)} / has unknown {sorted(unknown)}; "
                                f"expected exactly the keys of {example}")
        for name in ("memory_mb", "processes"):
            if type(data[name]) is not int or data[name] < 0:
                raise SettingsError(f"{SETTINGS_ENV}: {name} must be a whole number >= 0, not {data[name]!r}")
        if data["uid"] is not None and (type(data["uid"]) is not int or not 0 < data["uid"] < 2**32 - 1):
            raise SettingsError(f"{SETTINGS_ENV}: uid must be null or a uid above 0, not {data['uid']!r}")
        if type(data["isolated"]) is not bool:
            raise SettingsError(f"{SETTINGS_ENV}: isolated must be true or false, not {data['isolated']!r}")
        if data["isolated"] and not (data["memory_mb"] and data["processes"]):
            raise SettingsError(f"{SETTINGS_ENV}: an isolated program needs memory_mb and processes above 0, "
                                f"not {data['memory_mb']!r} and {data['processes']!r}")
        return cls(**data)


class Channel:
    """The program's result channel: one JSON object a line, flushed at once (a kill loses no finished line)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def emit(self, **data: Any) -> None:
        self.write_line(json.dumps(data))

    def write_line(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


def short(text: object, n: int = 300) -> str:
    """`text` cut to n characters, '...' marking a cut."""
    text = str(text)
    return text if len(text) <= n else text[:n] + "..."


def error_text(kind: str, message: str, assertion: bool = False) -> str:
    """How a failed test reads: 'AssertionError' for a bare assert, else 'Kind: message' (cut)."""
    if assertion and not message:
        return "AssertionError"
    return short(f"{kind}: {message}")


def exception_text(exc: BaseException) -> str:
    """error_text of a caught exception."""
    return error_text(type(exc).__name__, str(exc), isinstance(exc, AssertionError))


def calls_check(stmt: ast.stmt) -> bool:
    """A top-level `check(...)` call (HumanEval's test program ends with one)."""
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "check")


def apply_limits(settings: Settings) -> None:
    """Under bubblewrap (which ran as root): drop to the throw-away uid, then the address space and process limits."""
    if not settings.isolated:
        return
    import resource

    if settings.uid is not None:
        os.setgroups([])
        os.setgid(settings.uid)
        os.setuid(settings.uid)
    mem = settings.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_NPROC, (settings.processes, settings.processes))


def start() -> tuple[Channel, dict[str, Any]]:
    """The start of every confined program: its settings (refused: a line on stderr, exit REFUSED_EXIT before the
    `start` event, so the run is ungraded), its result channel, its request from stdin, its uid and limits."""
    raw = os.environ.get(SETTINGS_ENV, "")
    try:
        settings = Settings.from_json(raw) if raw else Settings()
    except SettingsError as exc:
        sys.stderr.write(f"sandbox settings refused: {exc}\n")
        sys.exit(REFUSED_EXIT)
    channel = Channel(os.fdopen(int(os.environ[RESULT_FD_ENV]), "w", buffering=1))
    channel.emit(type="start")
    request = json.loads(sys.stdin.read())
    try:
        apply_limits(settings)
    except Exception as exc:
        channel.emit(type="load_error", error=f"limits refused: {exc}")
        sys.exit(REFUSED_EXIT)
    return channel, request
