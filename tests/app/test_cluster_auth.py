"""A Ray cluster with token authentication (Ray 2.60+) refuses the client: evalkit says to set RAY_AUTH_MODE=token.

No cluster is started: ``ray.init`` is replaced by one that fails as Ray 2.60.0 fails against a token-authenticated
cluster (its ``ConnectionError`` carries the GCS client's ``AuthenticationError`` as traceback text in its cause).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evalkit.app.cli import main
from evalkit.common.output import ENV_VAR
from evalkit.runs import cluster

from ..conftest import TINY_DIR

ADDRESS = "192.0.2.7:6379"

# What Ray 2.60.0 raised from ray.init(address=...) when the cluster had token authentication on and the client
# had no RAY_AUTH_MODE (checked against a cluster started with `ray start --head` after `ray get-auth-token
# --generate`): the message of the cause's last line, which Ray keeps as text.
GCS_REFUSAL = (
    "Failed to connect to GCS. Last connection error: Traceback (most recent call last):\n"
    '  File "python/ray/includes/common.pxi", line 119, in ray._raylet.check_status\n'
    "ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing or incorrect."
)


def fake_ray(error: BaseException) -> Any:
    """A stand-in for the ray module whose ``init`` raises ``error``."""

    def init(**_: Any) -> None:
        raise error

    return SimpleNamespace(is_initialized=lambda: False, init=init, shutdown=lambda: None)


def refusal(cause_text: str) -> ConnectionError:
    """Ray's bare connect error, raised from a cause with ``cause_text`` (as ``ray._private.worker`` does)."""
    try:
        try:
            raise RuntimeError(cause_text)
        except RuntimeError as cause:
            raise ConnectionError(f"Failed to connect to Ray cluster at {ADDRESS}") from cause
    except ConnectionError as error:
        return error


def test_a_token_refusal_names_ray_auth_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setattr(cluster, "require_ray", lambda: fake_ray(refusal(GCS_REFUSAL)))
    with pytest.raises(cluster.RayAuthenticationError) as raised, cluster.connected(ADDRESS):
        pass
    message = str(raised.value)
    assert "set RAY_AUTH_MODE=token" in message and ADDRESS in message
    assert "Failed to connect" not in message


def test_with_token_mode_set_the_message_says_the_token_is_missing_or_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setattr(cluster, "require_ray", lambda: fake_ray(refusal(GCS_REFUSAL)))
    missing = "RAY_AUTH_MODE=token is set, but the token is missing"
    with pytest.raises(cluster.RayAuthenticationError, match=missing), cluster.connected(ADDRESS):
        pass


def test_other_connect_failures_are_left_as_ray_raised_them(monkeypatch: pytest.MonkeyPatch) -> None:
    error = refusal("Failed to connect to GCS. Last connection error: Connection refused")
    monkeypatch.setattr(cluster, "require_ray", lambda: fake_ray(error))
    with pytest.raises(ConnectionError) as raised, cluster.connected(ADDRESS):
        pass
    assert raised.value is error


def test_the_cli_exits_2_naming_ray_auth_mode_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setattr(cluster, "require_ray", lambda: fake_ray(refusal(GCS_REFUSAL)))
    argv = ["run", "--fixture", str(TINY_DIR), "--runs", "1", "--no-cache", "--ablations", "lexical"]
    code = main([*argv, "--ray", ADDRESS, "--output", "report.json"])
    err = capsys.readouterr().err
    assert code == 2
    assert "RAY_AUTH_MODE=token" in err and "Traceback" not in err
    assert not (tmp_path / "report.json").exists()
