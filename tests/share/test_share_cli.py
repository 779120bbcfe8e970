"""`metagen ui` share flags: the policy they make, bad values explained, and the printed URLs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.cli.main import build_parser
from app.cli.share_flags import launch_with_share, policy_from_args


def _args(*argv: str) -> Any:
    return build_parser().parse_args(["ui", *argv])


def test_local_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METAGEN_SHARE_MODE", raising=False)
    policy = policy_from_args(_args(), "127.0.0.1")
    assert not policy.share_mode and policy.allow_python and policy.gradio_auth() is None


def test_share_flags_make_a_share_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_MODELS", str(tmp_path))
    auth_file = tmp_path / "users.txt"
    auth_file.write_text("bob:builder\n")
    args = _args("--share-mode", "--auth", "ada:pw", "--auth-file", str(auth_file), "--cap-lm-calls", "7",
                 "--max-concurrent-runs", "2")
    policy = policy_from_args(args, "127.0.0.1")
    assert policy.share_mode and not policy.allow_python
    assert policy.gradio_auth() == [("ada", "pw"), ("bob", "builder")]
    assert policy.max_lm_calls == 7 and policy.max_concurrent_runs == 2
    assert policy_from_args(_args("--share", "--allow-python"), "127.0.0.1").allow_python
    assert policy_from_args(_args(), "0.0.0.0").share_mode  # reachable from other machines


@pytest.mark.parametrize(("argv", "message"), [
    (["--auth", "nocolon"], "USER:PASSWORD"),
    (["--auth-file", "/nonexistent/users.txt"], "cannot read the auth file"),
    (["--share-mode", "--cap-lm-calls", "0"], "--cap-lm-calls must be a positive number"),
])
def test_bad_share_flags_are_explained(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        policy_from_args(_args(*argv), "127.0.0.1")


def test_cli_refuses_bad_auth_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    assert main(["ui", "--auth", "nocolon", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "USER:PASSWORD" in err and "Traceback" not in err


class _FakeBlocks:
    """Stands in for gr.Blocks: Gradio prints its long message when the share tunnel cannot be made."""

    def __init__(self, share_url: str | None) -> None:
        self.share_url = share_url
        self.kwargs: dict[str, Any] = {}

    def launch(self, **kwargs: Any) -> tuple[None, str, str | None]:
        self.kwargs = kwargs
        if kwargs["share"] and not self.share_url:
            print("\nCould not create share link. Missing file: /root/.cache/frpc. \n\nPlease check your internet")
        return None, f"http://{kwargs['server_name']}:{kwargs['server_port']}/", self.share_url


def test_share_failure_is_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blocks = _FakeBlocks(share_url=None)
    launched = launch_with_share(blocks, host="127.0.0.1", port=7000, share=True)
    assert capsys.readouterr().out == ""  # Gradio's own text is not shown
    assert blocks.kwargs["prevent_thread_lock"] is True
    policy = policy_from_args(_args("--share"), "127.0.0.1")
    lines = launched.lines(policy)
    assert lines[0] == "Local URL:  http://127.0.0.1:7000/"
    assert lines[1].startswith("Public URL: none — could not create share link")
    assert "still runs locally" in lines[1]
    assert any("anyone with the link" in line for line in lines)


def test_both_urls_are_printed_when_the_tunnel_works() -> None:
    launched = launch_with_share(_FakeBlocks("https://abc.gradio.live"), host="127.0.0.1", port=7001, share=True)
    lines = launched.lines(policy_from_args(_args("--share", "--auth", "a:b"), "127.0.0.1"))
    assert lines[:2] == ["Local URL:  http://127.0.0.1:7001/", "Public URL: https://abc.gradio.live"]
    assert "Login required (1 user(s))." in lines
