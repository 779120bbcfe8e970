"""Getting a model through the Models tab in a real browser: search the fake Hub, see the GGUF files with the
fit estimate and the recommended quant, Pull with progress, Use in editor, then run on the pulled model with
the real engine; a shared app has no such section."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Studio, StudioServer, start_server, stop_server
from tests.fake_hub import FakeHub

pytestmark = [pytest.mark.e2e, pytest.mark.model]

REPO = "tester/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"
CATALOG_REPO = "unsloth/Qwen3-0.6B-GGUF"
CATALOG_FILE = "Qwen3-0.6B-Q4_K_M.gguf"


@pytest.fixture(scope="module")
def hub_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StudioServer, FakeHub]]:
    from backends.llama.models.bundled import bundled_model_path

    hub = FakeHub(chunk=1 << 20, delay_s=0.03)  # ~3 s for the 98 MB file: progress is visible
    hub.add(REPO, {FILE: Path(bundled_model_path()), "README.md": b"# smol\n"})
    # the catalog's first generator, served as a tiny GGUF of its own (the bundled model's bytes would be found
    # already here, under the name the first test pulled, and not downloaded): a Recommended row pulls it
    from tests.backends.rank_gguf import write_rank_gguf

    catalog_file = tmp_path_factory.mktemp("catalog") / CATALOG_FILE
    write_rank_gguf(catalog_file, seed=3)
    hub.add(CATALOG_REPO, {CATALOG_FILE: catalog_file})
    hub.start()
    saved = {k: os.environ.get(k) for k in ("HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_HUB_CACHE")}
    os.environ["HF_ENDPOINT"] = hub.url
    os.environ.pop("HF_HUB_OFFLINE", None)
    home = tmp_path_factory.mktemp("home")
    os.environ["HF_HUB_CACHE"] = str(home / "hf-cache")
    try:
        server = start_server(home, [])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield server, hub
    stop_server(server)
    hub.stop()


def test_pull_through_the_models_tab_then_run_on_it(page: Any, hub_studio: tuple[StudioServer, FakeHub],
                                                    shot: Any) -> None:
    server, hub = hub_studio
    ui = Studio(page, server).open()
    ui.open_example("instruction_greedy")
    ui.tab("Models")
    page.locator("#mg-get-model").get_by_text("Get a model").first.click()
    page.locator("#mg-hub-query textarea, #mg-hub-query input").first.fill("smollm2")
    page.locator("#mg-hub-search").click()
    page.get_by_text("1 repositories with GGUF files.").wait_for(timeout=30_000)
    page.locator("#mg-hub-files").click()
    page.wait_for_function("document.querySelector('#mg-hub-table').innerText.includes('★')",
                           timeout=30_000)
    table = page.locator("#mg-hub-table").inner_text()
    assert "Q4_1" in table and "yes" in table and "MB" in table, table
    shot(page, "files")
    page.locator("#mg-hub-pull").click()
    page.wait_for_function(  # Gradio's progress: bytes of the file, the rate
        "() => /MB of .*MB at/.test(document.body.innerText)", timeout=60_000)
    shot(page, "pulling")
    page.get_by_text(f"Pulled {FILE}").wait_for(timeout=120_000)
    assert (server.home / "models" / FILE).is_file()
    assert any(r is None for m, p, r in hub.requests if m == "GET" and p.endswith(FILE))
    page.locator("#mg-hub-use").click()
    ui.wait_yaml(lambda t: FILE in t and "source: path" in t, timeout_s=30)
    ui.tab("Editor")
    ui.click_run()
    assert ui.wait_run_finished(600) == "succeeded"
    answer = page.locator("[data-testid=run-outputs] [data-testid=output-answer]").inner_text().strip()
    assert answer
    shot(page, "ran")


def test_a_recommended_row_pulls_in_one_click(page: Any, hub_studio: tuple[StudioServer, FakeHub],
                                             shot: Any) -> None:
    """Clicking a Recommended row fills the repository and file; Pull then gets it and the list shows it."""
    server, _ = hub_studio
    ui = Studio(page, server).open()
    ui.tab("Models")
    page.locator("#mg-get-model").get_by_text("Get a model").first.click()
    page.locator("#mg-hub-recommended").get_by_text("Recommended models by role").first.click()
    table = page.locator("#mg-hub-recommended-table")
    assert "laptop" not in table.inner_text() and "yes (" in table.inner_text()
    table.get_by_text("Qwen3-0.6B", exact=True).first.click()
    page.get_by_text("press Pull").wait_for(timeout=30_000)
    shot(page, "recommended-picked")
    page.locator("#mg-hub-pull").click()
    page.get_by_text(f"Pulled {CATALOG_FILE}").wait_for(timeout=120_000)
    assert (server.home / "models" / CATALOG_FILE).is_file()
    page.wait_for_function("(f) => document.querySelector('#mg-models-table').innerText.includes(f)",
                           arg=CATALOG_FILE, timeout=30_000)
    shot(page, "recommended-pulled")


HUB_WORKFLOW = f"""version: 1
name: portable
models:
  main: {{source: hub, repo: {REPO}, quant: Q4_1}}
inputs:
  question: {{type: text, default: 'What is 3 + 4?'}}
nodes:
- id: answer
  kind: generator
  model: main
  params: {{prompt: '{{question}}', temperature: 0.0, max_tokens: 6}}
  inputs: {{question: inputs.question}}
outputs: {{answer: answer.text}}
"""


def test_a_hub_model_is_pulled_on_first_run(page: Any, hub_studio: tuple[StudioServer, FakeHub], shot: Any) -> None:
    """A workflow naming `{source: hub, repo, quant}` says what it needs and how large, pulls on a yes, then runs."""
    server, _ = hub_studio
    (server.home / "workflows").mkdir(parents=True, exist_ok=True)
    (server.home / "workflows" / "portable.yaml").write_text(HUB_WORKFLOW)
    for path in (server.home / "models").glob("*.gguf"):  # an earlier test of this module pulled it
        path.unlink()
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", answer)
    ui = Studio(page, server).open()
    ui.open_saved("portable")
    ui.click_run()
    assert ui.wait_run_finished(600) == "succeeded"
    assert asked and FILE in asked[0] and "MB" in asked[0] and REPO in asked[0], asked
    assert (server.home / "models" / FILE).is_file()
    shot(page, "pulled-on-first-run")


@pytest.fixture
def shared_studio(tmp_path: Path) -> Iterator[StudioServer]:
    server = start_server(tmp_path / "home", ["--dry-run", "--share-mode"])
    yield server
    stop_server(server)


def test_a_shared_app_has_no_get_a_model(shared_studio: StudioServer, page: Any) -> None:
    ui = Studio(page, shared_studio).open()  # the page closes before the server stops (fixture order)
    ui.tab("Models")
    page.locator("#mg-models-table").wait_for()
    assert page.locator("#mg-get-model").count() == 0
