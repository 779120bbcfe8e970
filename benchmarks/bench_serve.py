"""Benchmark of `metagen serve` against llama-cpp-python's own OpenAI server, side by side in one run.

Both servers run as their own processes on the bundled model file with the same thread count (CPU), and are
called over HTTP with the openai SDK:
  A. 16 concurrent clients, each asking for 64 tokens (/v1/completions): total wall time and tokens/s for
     `python -m llama_cpp.server` (from the `llama-cpp-python[server]` extra; the row is skipped, saying so,
     when it is not installed) and for Metagen (target: ≥ 1.5× its throughput);
  B. one request with n=16 against 16 separate concurrent requests to Metagen (target: ≤ 0.9× the time), on
     row A's short prompt and on a ~700-token prompt new to the server (its evaluation is what n shares: 16
     separate requests that arrive together each evaluate it);
  C. time to first token of a streamed workflow answer (chain_of_thought: its answer node streams once its
     reasoning node is done), with the time to the first byte and to the end;
  D. the MCP door (`metagen serve --mcp`, benchmarks/serve_probe.py) against /v1/chat/completions on the same server:
     one call at a time to a workflow without a model call (the doors' own cost; target: the MCP tool call adds
     ≤ 5 ms per request) and to a short generation, then --clients concurrent calls of a --tokens generation through
     each door (the engine's mean sequences per decode step say whether MCP calls are batched as /v1 calls are).
  E. the same workflow through each door: /v1/chat/completions, /v1/responses (stored, as by default) and
     /v1/messages, non-streamed, the doors interleaved request by request, each with a seed of its own: the
     median time of each and the server's CPU time per request, and what a door adds over chat completions
     (target: ≤ 5 ms per request).
Each row is the median of --runs runs, the two sides interleaved run by run so drifting load hits them alike.

Usage: python benchmarks/bench_serve.py [--runs 3] [--clients 16] [--tokens 64] [--threads N] [--only-mcp]
       python benchmarks/bench_serve.py --doors-only [--dry-run] [--door-requests 30] [--door-workflow NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402

from backends.llama.devices import default_threads  # noqa: E402
from backends.llama.models.bundled import bundled_model_path  # noqa: E402

PROMPT = "Once upon a time, in a small village by the sea, there lived"
LONG_PROMPT = ("The committee reviewed every proposal carefully and wrote detailed notes on each one. " * 50
               + "\nSummary of the notes:")
WORKFLOW_QUESTION = [{"role": "user", "content": "What is 17 + 25?"}]
START_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(command: list[str], env: dict[str, str], ready_url: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"{command[2]} exited with {process.returncode}:\n{log.read_text()[-2000:]}")
                try:
                    httpx.get(ready_url, timeout=2)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{command[2]} did not start:\n{log.read_text()[-2000:]}") from None
                    time.sleep(0.3)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def concurrent_completions(client: openai.OpenAI, model: str, clients: int, tokens: int,
                           prompt: str = PROMPT) -> tuple[float, int]:
    """`clients` requests at once, one per thread; (wall seconds, completion tokens)."""

    def one(i: int) -> int:
        reply = client.completions.create(model=model, prompt=prompt, max_tokens=tokens, temperature=0.8,
                                          seed=1000 + i)
        return reply.usage.completion_tokens

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        produced = sum(pool.map(one, range(clients)))
    return time.perf_counter() - started, produced


def one_request_n(client: openai.OpenAI, model: str, n: int, tokens: int, prompt: str = PROMPT) -> tuple[float, int]:
    started = time.perf_counter()
    reply = client.completions.create(model=model, prompt=prompt, max_tokens=tokens, temperature=0.8, seed=1000, n=n)
    return time.perf_counter() - started, reply.usage.completion_tokens


def streamed_workflow(base_url: str) -> tuple[float, float, float]:
    """(first byte, first answer token, end) in seconds, for a streamed chain_of_thought answer."""
    started = time.perf_counter()
    first_byte = first_token = None
    with httpx.stream("POST", f"{base_url}/chat/completions", timeout=300, json={
            "model": "chain_of_thought", "messages": WORKFLOW_QUESTION, "stream": True}) as response:
        for line in response.iter_lines():
            now = time.perf_counter() - started
            if first_byte is None:
                first_byte = now
            if first_token is None and line.startswith("data: {") and '"content":"' in line \
                    and '"content":""' not in line:
                first_token = now
    end = time.perf_counter() - started
    return first_byte or end, first_token or end, end


DOORS = {"chat completions": "/chat/completions", "responses": "/responses",
         "responses, store: false": "/responses", "messages": "/messages"}
"""Row D's doors by label: the path each posts to."""


def door_body(door: str, workflow: str, seed: int) -> dict[str, object]:
    """The same question to `workflow` through `door` (the run's own max_tokens: /v1/messages' only caps them)."""
    question = WORKFLOW_QUESTION[0]["content"]
    if DOORS[door] == "/responses":
        return {"model": workflow, "input": question, "seed": seed, "store": door == "responses"}
    if DOORS[door] == "/messages":
        return {"model": workflow, "max_tokens": 4096, "messages": WORKFLOW_QUESTION, "seed": seed}
    return {"model": workflow, "messages": WORKFLOW_QUESTION, "seed": seed}


def process_cpu_s(pid: int) -> float:
    """CPU seconds a process has used (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def door_latencies(base_url: str, workflow: str, requests: int, pid: int) -> dict[str, list[tuple[float, float]]]:
    """(wall seconds, server CPU seconds) per request through each door: `requests` rounds, each asking every door
    once, the order reversed every other round; every request has a seed of its own, so none is answered from the
    sample cache of an earlier one."""
    times: dict[str, list[tuple[float, float]]] = {door: [] for door in DOORS}
    with httpx.Client(base_url=base_url, timeout=300) as client:
        for door in DOORS:  # warm-up: each door's first request
            client.post(DOORS[door], json=door_body(door, workflow, 0)).raise_for_status()
        seeds = iter(range(1, 10**9))
        for i in range(requests):
            for door in list(DOORS) if i % 2 == 0 else list(reversed(DOORS)):
                body = door_body(door, workflow, next(seeds))
                cpu, started = process_cpu_s(pid), time.perf_counter()
                client.post(DOORS[door], json=body).raise_for_status()
                times[door].append((time.perf_counter() - started, process_cpu_s(pid) - cpu))
    return times


def print_door_rows(workflow: str, times: dict[str, list[tuple[float, float]]]) -> None:
    """Each door's median time and the server's mean CPU time per request, and what the door adds: the median over
    rounds of (its time - chat completions' time in the same round), so load that drifts between rounds cancels
    out; on a loaded machine the CPU time is the steadier figure."""
    base = [wall for wall, _ in times["chat completions"]]
    base_cpu = statistics.mean(cpu for _, cpu in times["chat completions"])
    print(f"\nD. one workflow ({workflow}) through each door, {len(base)} rounds: median wall time, mean server CPU")
    for door, spent in times.items():
        walls, cpu = [wall for wall, _ in spent], statistics.mean(c for _, c in spent)
        extra = statistics.median(t - b for t, b in zip(walls, base, strict=True)) * 1000
        added = "" if door == "chat completions" else \
            f"   {extra:+6.1f} ms wall, {(cpu - base_cpu) * 1000:+5.1f} ms CPU over chat completions (target ≤ 5 ms)"
        print(f"  {door:<24} {statistics.median(walls) * 1000:7.1f} ms  {cpu * 1000:5.1f} ms CPU{added}")


class Row:
    def __init__(self, name: str) -> None:
        self.name = name
        self.times: list[float] = []
        self.tokens: list[int] = []

    def add(self, result: tuple[float, int]) -> None:
        self.times.append(result[0])
        self.tokens.append(result[1])

    @property
    def wall(self) -> float:
        return statistics.median(self.times)

    @property
    def rate(self) -> float:
        return statistics.median(t / s for s, t in zip(self.times, self.tokens, strict=True))

    def line(self) -> str:
        tokens = statistics.median(self.tokens)
        return f"  {self.name:<46} {self.wall:7.2f} s   {self.rate:7.1f} tokens/s   ({tokens:.0f} tokens)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--only-mcp", action="store_true", help="only the MCP rows (D)")
    parser.add_argument("--calls", type=int, default=40, help="D: sequential calls per door for the latency rows")
    parser.add_argument("--doors-only", action="store_true", help="only row D (the doors)")
    parser.add_argument("--door-requests", type=int, default=30)
    parser.add_argument("--door-workflow", default="instruction_greedy")
    parser.add_argument("--dry-run", action="store_true", help="with --doors-only: metagen serve --dry-run (the "
                        "scripted fake model), so row D measures the doors alone")
    args = parser.parse_args()
    model_path = bundled_model_path()
    home = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    env = {**os.environ, "METAGEN_HOME": str(home), "PYTHONPATH": str(ROOT), "GRADIO_ANALYTICS_ENABLED": "False"}
    for key in ("METAGEN_WORKFLOWS", "METAGEN_TRACE_DB", "METAGEN_MODELS", "METAGEN_SHARE_MODE", "METAGEN_API_KEY"):
        env.pop(key, None)
    from app.platform.settings import update_device_settings

    update_device_settings({"device": "cpu", "threads": args.threads}, path=home / "settings.json")
    have_llama_server = importlib.util.find_spec("sse_starlette") is not None and \
        importlib.util.find_spec("starlette_context") is not None and \
        importlib.util.find_spec("pydantic_settings") is not None
    print(f"model {model_path.name}, {args.threads} threads (CPU), {args.clients} clients × {args.tokens} tokens, "
          f"median of {args.runs} run(s); load before: {os.getloadavg()[0]:.2f}")
    if args.only_mcp:
        mcp_door_rows(args, env, home)
        shutil.rmtree(home, ignore_errors=True)
        return
    mg_port, lc_port = free_port(), free_port()
    mg_url, lc_url = f"http://127.0.0.1:{mg_port}/v1", f"http://127.0.0.1:{lc_port}/v1"
    metagen_cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(mg_port),
                   "--max-concurrent-runs", str(max(16, args.clients)), *(["--dry-run"] if args.dry_run else [])]
    llama_cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--host", "127.0.0.1",
                 "--port", str(lc_port), "--n_threads", str(args.threads), "--n_threads_batch", str(args.threads),
                 "--n_ctx", "4096", "--n_gpu_layers", "0"]
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, home, ignore_errors=True)  # last, once the servers are stopped
        mg_pid = stack.enter_context(server(metagen_cmd, env, f"{mg_url}/models", home / "metagen.log")).pid
        mg = openai.OpenAI(base_url=mg_url, api_key="unused", max_retries=0, timeout=600)
        mg_model = model_path.name
        lc: openai.OpenAI | None = None
        if args.doors_only:
            print_door_rows(args.door_workflow, door_latencies(mg_url, args.door_workflow, args.door_requests, mg_pid))
            return
        if have_llama_server:
            stack.enter_context(server(llama_cmd, env, f"{lc_url}/models", home / "llama_cpp_server.log"))
            lc = openai.OpenAI(base_url=lc_url, api_key="unused", max_retries=0, timeout=600)
        for client in (mg, lc):  # warm-up: model load, first-call caches
            if client is not None:
                client.completions.create(model=mg_model, prompt=PROMPT, max_tokens=8)
        streamed_workflow(mg_url)

        rows = {k: Row(v) for k, v in (
            ("lc", f"llama_cpp.server, {args.clients} concurrent clients"),
            ("mg", f"metagen serve, {args.clients} concurrent clients"),
            ("sep", f"metagen serve, {args.clients} separate requests"),
            ("n", f"metagen serve, one request with n={args.clients}"),
            ("sep_long", f"metagen serve, {args.clients} separate requests"),
            ("n_long", f"metagen serve, one request with n={args.clients}"))}
        ttft: list[tuple[float, float, float]] = []
        tags = iter(range(10**6))

        def fresh_long() -> str:
            """The long prompt behind a tag no earlier request had (nothing of it is in the prefix cache)."""
            return f"[{next(tags)}] {LONG_PROMPT}"

        jobs: list[tuple[str, Callable[[], tuple[float, int]]]] = [
            ("mg", lambda: concurrent_completions(mg, mg_model, args.clients, args.tokens)),
            ("n", lambda: one_request_n(mg, mg_model, args.clients, args.tokens)),
            ("sep_long", lambda: concurrent_completions(mg, mg_model, args.clients, args.tokens, fresh_long())),
            ("n_long", lambda: one_request_n(mg, mg_model, args.clients, args.tokens, fresh_long()))]
        if lc is not None:
            jobs.insert(1, ("lc", lambda: concurrent_completions(lc, mg_model, args.clients, args.tokens)))
        for run in range(args.runs):
            for key, job in (jobs if run % 2 == 0 else list(reversed(jobs))):
                result = job()
                rows[key].add(result)
                if key == "mg":
                    rows["sep"].add(result)
            ttft.append(streamed_workflow(mg_url))
        doors = door_latencies(mg_url, args.door_workflow, args.door_requests, mg_pid)

    print("\nA. concurrent clients, /v1/completions")
    if lc is not None:
        print(rows["lc"].line())
    print(rows["mg"].line())
    if lc is not None:
        ratio = rows["mg"].rate / rows["lc"].rate
        print(f"  → metagen / llama_cpp.server throughput: {ratio:.2f}× (target ≥ 1.5×)")
    else:
        print("  llama_cpp.server: skipped — its extra is not installed "
              "(pip install 'llama-cpp-python[server]', or '.[bench]')")
    print(f"\nB. one request with n={args.clients} vs {args.clients} separate requests (metagen)")
    for sep, n, what in (("sep", "n", "short prompt (row A's)"), ("sep_long", "n_long", "~700-token new prompt")):
        print(f"  {what}:")
        print(rows[sep].line())
        print(rows[n].line())
        print(f"  → n={args.clients} / separate: {rows[n].wall / rows[sep].wall:.2f}× the time (target ≤ 0.9×)")
    first_byte, first_token, end = (statistics.median(x) for x in zip(*ttft, strict=True))
    print("\nC. streamed workflow answer (chain_of_thought)")
    print(f"  first byte {first_byte * 1000:.0f} ms · first answer token {first_token * 1000:.0f} ms · "
          f"end {end * 1000:.0f} ms")
    mcp_door_rows(args, env, home)
    print_door_rows(args.door_workflow, doors)
    print(f"\nload after: {os.getloadavg()[0]:.2f}")
    shutil.rmtree(home, ignore_errors=True)


# ---------------------------------------------------------------- D. the MCP door against /v1/chat/completions

MCP_WORKFLOWS = {
    "echo": "version: 1\nname: echo\ndescription: A template, no model call.\ninputs:\n  text: {type: text}\n"
            "nodes:\n- id: say\n  kind: template\n  params: {template: 'You said: {text}'}\n"
            "  inputs: {text: inputs.text}\noutputs: {answer: say.text}\n",
    "short": "version: 1\nname: short\ndescription: Eight greedy tokens.\nmodels:\n  main: {source: bundled}\n"
             "inputs:\n  text: {type: text}\nnodes:\n- id: say\n  kind: generator\n  model: main\n"
             "  params: {prompt: '{text}', max_tokens: 8, temperature: 0.0}\n  inputs: {text: inputs.text}\n"
             "outputs: {answer: say.text}\n",
    "story": "version: 1\nname: story\ndescription: A sampled story of --tokens tokens.\nmodels:\n"
             "  main: {source: bundled}\ninputs:\n  text: {type: text}\nnodes:\n- id: say\n  kind: generator\n"
             "  model: main\n  params: {prompt: '{text}', max_tokens: TOKENS, temperature: 0.8}\n"
             "  inputs: {text: inputs.text}\noutputs: {answer: say.text}\n",
}


async def _chat_call(http: httpx.AsyncClient, model: str, text: str) -> tuple[float, int]:
    started = time.perf_counter()
    reply = await http.post("/v1/chat/completions", json={"model": model, "messages": [
        {"role": "user", "content": text}]})
    reply.raise_for_status()
    return time.perf_counter() - started, reply.json()["usage"]["total_tokens"]


async def _mcp_call(client: object, name: str, text: str) -> tuple[float, int]:
    started = time.perf_counter()
    result = await client.call_tool(name, {"text": text})  # type: ignore[attr-defined]
    if result.is_error:
        raise RuntimeError(f"MCP call of {name} failed: {result.content}")
    return time.perf_counter() - started, result.structured_content["stats"]["tokens"]


async def _concurrent(call: Callable[..., object], n: int, *args: object) -> float:
    import anyio

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(call, *args[:-1], f"{args[-1]} ({i})")
    return time.perf_counter() - started


async def _engine_step(http: httpx.AsyncClient, call: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, completion tokens per decode step of the engine) over `call`."""
    before = (await http.get("/probe/engine-stats")).json()
    wall = await call()  # type: ignore[misc]
    after = (await http.get("/probe/engine-stats")).json()
    steps = after["decode_calls"] - before["decode_calls"]
    return wall, (after["completion_tokens"] - before["completion_tokens"]) / max(1, steps)


async def _mcp_door(base: str, args: argparse.Namespace) -> None:
    from mcp import Client

    async with httpx.AsyncClient(base_url=base, timeout=1800) as http, Client(f"{base}/mcp") as client:
        for name in ("echo", "short"):  # warm-up: model load, the client's tool list, first-call caches
            await _chat_call(http, name, "warm up")
            await _mcp_call(client, name, "warm up")
        print("\nD. MCP tool call (streamable HTTP) vs /v1/chat/completions on one server, calls one at a time, "
              "interleaved (median)", flush=True)
        for name, what, calls in (("echo", "workflow without a model call (template)", args.calls),
                                  ("short", "8 greedy tokens", max(1, args.calls // 10))):
            chat, mcp = [], []
            for i in range(calls):
                chat.append((await _chat_call(http, name, f"Hello number {i}."))[0] * 1000)
                mcp.append((await _mcp_call(client, name, f"Hello number {i}."))[0] * 1000)
            added = statistics.median(m - c for m, c in zip(mcp, chat, strict=True))  # pairs: drifting load cancels
            print(f"  {what:<42} chat {statistics.median(chat):7.1f} ms · MCP {statistics.median(mcp):7.1f} ms · "
                  f"added {added:+6.1f} ms per call, median of pairs (target ≤ 5 ms; {calls} calls each)",
                  flush=True)
        print(f"  {args.clients} concurrent calls × {args.tokens} sampled tokens:", flush=True)
        for run in range(args.runs):
            doors = [("/v1/chat/completions", lambda: _concurrent(_chat_call, args.clients, http, "story", PROMPT)),
                     ("MCP tools/call", lambda: _concurrent(_mcp_call, args.clients, client, "story", PROMPT))]
            for door, call in (doors if run % 2 == 0 else list(reversed(doors))):
                wall, per_step = await _engine_step(http, call)
                print(f"    {door:<22} {wall:7.2f} s · mean sequences per decode step {per_step:5.2f} "
                      f"(run {run + 1})", flush=True)


def mcp_door_rows(args: argparse.Namespace, env: dict[str, str], home: Path) -> None:
    """Section D: the MCP door against /v1/chat/completions on one `serve_probe.py` server."""
    import anyio

    folder = home / "mcp-workflows"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in MCP_WORKFLOWS.items():
        (folder / f"{name}.yaml").write_text(text.replace("TOKENS", str(args.tokens)), encoding="utf-8")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, str(ROOT / "benchmarks" / "serve_probe.py"), str(port), str(folder)]
    with server(command, env, f"{base}/v1/models", home / "serve_probe.log"):
        anyio.run(_mcp_door, base, args)


if __name__ == "__main__":
    main()
