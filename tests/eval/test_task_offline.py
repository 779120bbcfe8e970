"""A task preset offline (issue 37, 2.5): the Hub is asked once, briefly, and a dataset not in the cache fails at
once, saying how to give a local copy (--data, an upload); a cached one still loads. The "Hub" here is a local
socket that accepts connections and never answers (what a blocked network looks like), counting them."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli.main import main
from app.eval import hub_datasets
from app.eval.datasets import DatasetError
from app.eval.tasks import load_task, load_task_dataset, source_columns
from app.service.errors import UserError
from tests.eval.hub_cache import prefill
from tests.studio_fixtures import studio_service

ROOT = Path(__file__).resolve().parents[2]
COT = ROOT / "workflows" / "chain_of_thought.yaml"
GSM8K_ROWS = [{"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"}]


class SilentHub:
    """A listening socket that accepts and never answers; `connections` counts who came."""

    def __init__(self) -> None:
        self.looked_up: list[str] = []
        """Host names anyone in this process resolved while the fixture ran (the library's own Hub calls)."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    @property
    def connections(self) -> int:
        return len(self.accepted)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SilentHub, Path]]:
    """The Hub (ours and the library's endpoint) a silent socket, offline mode not set, an empty datasets cache."""
    datasets = pytest.importorskip("datasets")
    import huggingface_hub.constants

    hub = SilentHub()
    resolve = socket.getaddrinfo

    def watched(host: object, *args: object, **kwargs: object) -> object:
        hub.looked_up.append(str(host))
        return resolve(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", watched)
    cache = tmp_path / "hf-datasets"
    cache.mkdir()
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", hub.url)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-hub"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_datasets, "PROBE_TIMEOUT_S", 0.5)
    monkeypatch.setattr(hub_datasets, "_probes", {})
    yield hub, cache
    hub.close()


def test_a_preset_not_cached_fails_at_once_and_says_how_to_use_a_local_file(silent_hub: tuple[SilentHub, Path]) -> None:
    hub, _ = silent_hub
    task = load_task("gsm8k")
    for _ in range(2):  # asked again (Estimate, then Start): the Hub is not asked again
        with pytest.raises(DatasetError) as caught:
            load_task_dataset(task)
        text = str(caught.value)
        assert "hf:openai/gsm8k:main@test is not in this machine's dataset cache" in text
        assert "--task gsm8k --data FILE" in text and "pick gsm8k in the Task preset list" in text
        assert "with the columns question, answer" in text
    assert hub.connections == 1  # one probe; the library never waited on the network
    assert set(hub.looked_up) <= {"127.0.0.1"}
    assert source_columns(task) == ["question", "answer"]
    assert source_columns(load_task("gpqa_diamond")) == ["Question", "Correct Answer", "Incorrect Answer 1",
                                                         "Incorrect Answer 2", "Incorrect Answer 3"]


def test_a_cached_preset_still_loads_when_the_hub_is_silent(silent_hub: tuple[SilentHub, Path]) -> None:
    hub, cache = silent_hub
    prefill(cache, "openai/gsm8k", "main", {"test": GSM8K_ROWS})
    dataset = load_task_dataset(load_task("gsm8k"))
    assert [row["answer"] for row in dataset.rows] == ["7"]
    assert hub.connections == 1


def test_a_local_copy_in_place_of_the_hubs_needs_no_hub(silent_hub: tuple[SilentHub, Path], tmp_path: Path) -> None:
    hub, _ = silent_hub
    copy = tmp_path / "gsm8k.jsonl"
    copy.write_text("".join(json.dumps(r) + "\n" for r in GSM8K_ROWS), encoding="utf-8")
    assert [row["answer"] for row in load_task_dataset(load_task("gsm8k"), copy).rows] == ["7"]
    assert hub.connections == 0


def test_the_evaluate_tab_preview_estimate_and_start_fail_at_once(silent_hub: tuple[SilentHub, Path],
                                                                   tmp_path: Path) -> None:
    hub, _ = silent_hub
    service = studio_service(tmp_path)
    evals = service.evaluations
    request = {"workflows": [{"name": "chain_of_thought", "yaml": COT.read_text(encoding="utf-8")}],
               "dataset": "task:gsm8k"}
    for ask in (lambda: evals.preview("task:gsm8k"), lambda: evals.estimate(request), lambda: evals.start(request)):
        with pytest.raises(UserError, match="pick gsm8k in the Task preset list"):
            ask()
    assert hub.connections == 1 and set(hub.looked_up) <= {"127.0.0.1"}
    service.close()


def test_the_cli_fails_at_once(silent_hub: tuple[SilentHub, Path], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    hub, _ = silent_hub
    code = main(["eval", str(COT), "--task", "gsm8k", "--dry-run", "--db", str(tmp_path / "t.db")])
    err = capsys.readouterr().err
    assert code == 2 and "--task gsm8k --data FILE" in err and "nothing was run" in err
    assert hub.connections == 1
