"""One stdin/stdout pair's child: the candidate's program run as `__main__` on the given stdin (its stdout is the
answer the supervisor compares). Run by the supervisor with `python -I -S -c <this file's text>`."""

import io
import json
import sys


def main() -> None:
    request = json.loads(sys.stdin.read())
    sys.stdin = io.StringIO(request["stdin"])
    code = compile(request["code"], "<candidate>", "exec")
    del request
    exec(code, {"__name__": "__main__"})


if __name__ == "__main__":
    main()
