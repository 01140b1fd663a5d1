"""HTTP errors, retries and Retry-After through the Python SDK."""

from __future__ import annotations

import pytest

from createos import Client, CreateSandboxRequest, RetryOptions, RunCommandRequest
from support import MockApi, SandboxTracker, expect_api_error, header, unique_name


@pytest.fixture(autouse=True)
def no_faults(mock: MockApi):
    mock.clear_faults()
    yield
    mock.clear_faults()


def test_unknown_sandbox_is_404(client: Client) -> None:
    error = expect_api_error(
        lambda: client.get_sandbox("sb-00000000000000000000000000"), 404, {"sandbox": "sandbox not found"}
    )
    assert error.method == "GET"
    assert "sb-00000000000000000000000000" in error.endpoint


def test_unknown_shape_is_400(client: Client) -> None:
    expect_api_error(
        lambda: client.create_sandbox(CreateSandboxRequest(shape="s-bad")),
        400,
        {"shape": "unknown shape: s-bad"},
    )


def test_invalid_env_name_and_auto_pause_are_400(client: Client, shape) -> None:
    expect_api_error(
        lambda: client.create_sandbox(CreateSandboxRequest(shape=shape.id, environment_variables={"1X": "v"})),
        400,
    )
    expect_api_error(
        lambda: client.create_sandbox(CreateSandboxRequest(shape=shape.id, auto_pause_after_seconds=10)),
        400,
        {"auto_pause_after_seconds": "must be between 60 and 86400"},
    )


def test_sandbox_name_clash_is_409(client: Client, tracker: SandboxTracker, shape) -> None:
    name = unique_name("py-clash")
    tracker.create(CreateSandboxRequest(shape=shape.id, name=name))
    expect_api_error(
        lambda: client.create_sandbox(CreateSandboxRequest(shape=shape.id, name=name)),
        409,
        {"name": "name already in use"},
    )


def test_wrong_api_key_is_401_but_public_catalog_answers() -> None:
    with Client(api_key="skp_not_a_real_key") as wrong:
        expect_api_error(wrong.who_am_i, 401, {"auth": "invalid api key"})
        expect_api_error(wrong.list_sandboxes, 401)
        assert wrong.list_shapes()
        assert wrong.health().up is True


def test_other_tenants_sandbox_is_404(client: Client, mock: MockApi, tracker: SandboxTracker, shape) -> None:
    mine = tracker.create(CreateSandboxRequest(shape=shape.id))
    tenant = mock.new_tenant()
    with Client(api_key=tenant["api_key"]) as other:
        assert other.who_am_i().user_id != client.who_am_i().user_id
        expect_api_error(lambda: other.get_sandbox(mine.id), 404)
        assert mine.id not in {s.id for s in other.list_sandboxes()}


def test_429_with_retry_after_when_retries_are_off(client: Client, mock: MockApi) -> None:
    mock.add_fault("GET /v1/whoami status=429 retry_after=7 count=1")
    before = mock.stats()
    with Client(retry=RetryOptions(max_retries=0)) as no_retry:
        error = expect_api_error(no_retry.who_am_i, 429, {"rate": "rate limited"})
        assert header(error, "retry-after") == "7"
        after = mock.stats()
        assert after["handled"].get("whoami", 0) == before["handled"].get("whoami", 0), "the handler ran"
        assert after["faults_injected"] - before["faults_injected"] == 1
        assert no_retry.who_am_i().user_id  # count=1: the rule is spent


def test_sdk_honours_retry_after_and_retries(client: Client, mock: MockApi) -> None:
    mock.add_fault("GET /v1/whoami status=429 retry_after=1 count=1")
    before = mock.stats()
    assert client.who_am_i().user_id
    after = mock.stats()
    assert after["requests"]["whoami"] - before["requests"].get("whoami", 0) == 2
    assert after["handled"]["whoami"] - before["handled"].get("whoami", 0) == 1


def test_persistent_429_exhausts_retries(client: Client, mock: MockApi) -> None:
    mock.add_fault("GET /v1/whoami status=429 retry_after=0 count=3")
    before = mock.stats()
    expect_api_error(client.who_am_i, 429)
    after = mock.stats()
    assert after["requests"]["whoami"] - before["requests"].get("whoami", 0) == 3, "1 try + 2 retries"


def test_503_on_post_exec_is_retried_once(client: Client, mock: MockApi, tracker: SandboxTracker, shape) -> None:
    sandbox = tracker.create(CreateSandboxRequest(shape=shape.id))
    mock.add_fault(f"POST /v1/sandboxes/{sandbox.id}/exec status=503 count=1")
    before = mock.stats()
    out = sandbox.run_command(
        RunCommandRequest(command="sh", arguments=["-c", "echo ran >> /root/runs.log; cat /root/runs.log"])
    )
    assert out.result.standard_output == "ran\n"
    after = mock.stats()
    assert after["requests"]["exec"] - before["requests"].get("exec", 0) == 2
    assert after["handled"]["exec"] - before["handled"].get("exec", 0) == 1
