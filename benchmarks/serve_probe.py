"""`metagen serve --mcp` on the bundled model plus GET /probe/engine-stats (the engine's counters, so a benchmark can
tell how many sequences each decode step carried): the server of bench_serve.py's MCP rows.

Usage: python benchmarks/serve_probe.py PORT WORKFLOWS_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from app.mcp.http import McpHttp  # noqa: E402
from app.serve.config import ServeConfig, remote_policy_for  # noqa: E402
from app.serve.server import build_server, make_server  # noqa: E402
from app.service.studio import StudioService  # noqa: E402
from app.share.policy import SharePolicy  # noqa: E402
from app.share.run_gate import RunGate  # noqa: E402
from backends.base import ModelSpec  # noqa: E402

ENGINE_STATS_PATH = "/probe/engine-stats"


def main() -> None:
    port, folder = int(sys.argv[1]), Path(sys.argv[2])
    service = StudioService(policy=SharePolicy.local(), workflows_dir=folder)
    config = ServeConfig(remote_policy=remote_policy_for(service.policy, models_folder=service.models_dir),
                         gate=RunGate(32, 64))
    endpoint = McpHttp(service, config)

    async def engine_stats(request: Request) -> Response:
        backend = await anyio.to_thread.run_sync(service.scheduler.provider, ModelSpec())
        return JSONResponse(await anyio.to_thread.run_sync(backend.engine_stats))

    app = build_server(service, config, extra_routes=[*endpoint.routes(), Route(ENGINE_STATS_PATH, engine_stats)],
                       lifespan=endpoint.lifespan)
    try:
        make_server(app, "127.0.0.1", port, lifespan=True).run()
    finally:
        service.close()


if __name__ == "__main__":
    main()
