"""Pause → wait → resume → wait, and fork of a paused sandbox, through the Python SDK."""

from __future__ import annotations

import pytest

from createos import (
    CreateSandboxRequest,
    ForkSandboxRequest,
    RunCommandRequest,
    SandboxStatus,
    WaitOptions,
)
from support import SandboxTracker, expect_api_error

WAIT = WaitOptions(timeout=30)


@pytest.fixture(scope="module")
def sandbox(tracker: SandboxTracker, shape):
    box = tracker.create(
        CreateSandboxRequest(shape=shape.id, environment_variables={"INTEROP_ROLE": "parent"})
    )
    box.files.upload("/root/state.txt", b"before pause\n")
    return box


def read(sandbox, path: str) -> bytes:
    with sandbox.files.download(path) as download:
        return download.read()


def role(sandbox) -> str:
    request = RunCommandRequest(command="sh", arguments=["-c", 'printf "%s" "$INTEROP_ROLE"'])
    return sandbox.run_command(request).result.standard_output


def test_fork_of_a_running_sandbox_is_refused(sandbox) -> None:
    expect_api_error(sandbox.fork, 409, {"sandbox": "sandbox must be paused to fork"})


def test_resume_of_a_running_sandbox_keeps_it_running(sandbox) -> None:
    assert sandbox.resume().status == SandboxStatus.RUNNING


def test_pause_then_wait(sandbox) -> None:
    sandbox.pause()
    assert sandbox.status in (SandboxStatus.PAUSING, SandboxStatus.PAUSED)
    sandbox.wait_until_paused(WAIT)
    assert sandbox.status == SandboxStatus.PAUSED
    assert sandbox.data.paused_at is not None


def test_pause_of_a_paused_sandbox_is_accepted(sandbox) -> None:
    assert sandbox.pause().status == SandboxStatus.PAUSED


def test_exec_and_files_on_a_paused_sandbox_conflict(sandbox) -> None:
    expect_api_error(
        lambda: sandbox.run_command(RunCommandRequest(command="true")),
        409,
        {"sandbox": "sandbox is not running"},
    )
    expect_api_error(lambda: read(sandbox, "/root/state.txt"), 409)


def test_who_am_i_counts_the_paused_sandbox(client, sandbox) -> None:
    assert client.who_am_i().stats.paused >= 1


def test_fork_of_the_paused_sandbox(tracker: SandboxTracker, sandbox) -> None:
    child = tracker.add(sandbox.fork(ForkSandboxRequest(environment_variables={"INTEROP_ROLE": "child"})))
    assert child.id != sandbox.id
    assert child.data.forked_from == sandbox.id
    assert child.status in (SandboxStatus.FORKING, SandboxStatus.RUNNING)
    child.wait_until_running(WAIT)
    assert read(child, "/root/state.txt") == b"before pause\n"
    assert role(child) == "child"
    child.files.upload("/root/state.txt", b"child only\n")
    assert sandbox.refresh().status == SandboxStatus.PAUSED


def test_fork_with_start_paused(tracker: SandboxTracker, sandbox) -> None:
    sleeper = tracker.add(sandbox.fork(ForkSandboxRequest(start_paused=True)))
    assert sleeper.data.forked_from == sandbox.id
    sleeper.wait_until_paused(WAIT)
    sleeper.destroy()
    sleeper.wait_until_destroyed(WAIT)


def test_resume_then_wait_restores_the_parent(sandbox) -> None:
    sandbox.resume()
    assert sandbox.status in (SandboxStatus.RESUMING, SandboxStatus.RUNNING)
    sandbox.wait_until_running(WAIT)
    assert sandbox.data.last_resumed_at is not None
    assert read(sandbox, "/root/state.txt") == b"before pause\n", "the child's write leaked"
    assert role(sandbox) == "parent"


def test_second_pause_resume_round_trip(sandbox) -> None:
    sandbox.pause().wait_until_paused(WAIT)
    sandbox.resume().wait_until_running(WAIT)
    out = sandbox.run_command(RunCommandRequest(command="echo", arguments=["alive"]))
    assert out.result.standard_output == "alive\n"
