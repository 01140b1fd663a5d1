"""Managed processes (pipes and PTY) through the Python SDK."""

from __future__ import annotations

import pytest

from createos import (
    CreateSandboxRequest,
    ManagedProcessConnectEventType,
    ManagedProcessConnectOptions,
    ManagedProcessCreateRequest,
    ManagedProcessDeleteOptions,
    ManagedProcessKind,
    ManagedProcessSignal,
    ManagedProcessState,
    ManagedProcessStream,
    ManagedProcessWaitOptions,
    ManagedProcessWaitScope,
    PTYSize,
)
from support import SandboxTracker, expect_api_error

LEADER = ManagedProcessWaitOptions(scope=ManagedProcessWaitScope.LEADER, wait_timeout=20)
TREE = ManagedProcessWaitOptions(scope=ManagedProcessWaitScope.TREE, wait_timeout=20)


@pytest.fixture(scope="module")
def sandbox(tracker: SandboxTracker, shape):
    return tracker.create(CreateSandboxRequest(shape=shape.id))


def drain(sandbox, process_id: str, after: int = 0):
    """All events of a connect stream up to and including the exit event."""
    events = []
    options = ManagedProcessConnectOptions(after_sequence=after)
    with sandbox.processes.connect(process_id, options) as stream:
        for event in stream:
            if event.type is ManagedProcessConnectEventType.HEARTBEAT:
                continue
            events.append(event)
            if event.type in (ManagedProcessConnectEventType.EXIT, ManagedProcessConnectEventType.ERROR):
                break
    return events


def output(events, stream: ManagedProcessStream | None = None) -> bytes:
    return b"".join(
        e.data
        for e in events
        if e.type is ManagedProcessConnectEventType.DATA and (stream is None or e.stream is stream)
    )


def test_pipe_process_input_wait_and_replay(sandbox) -> None:
    proc = sandbox.processes.create(
        ManagedProcessCreateRequest(
            command="sh", arguments=["-c", "echo hello; read line; echo got:$line; echo oops >&2; exit 5"]
        )
    )
    assert proc.process_id
    assert proc.kind is ManagedProcessKind.PROCESS
    assert proc.pid > 0
    assert proc.state in (ManagedProcessState.STARTING, ManagedProcessState.RUNNING)

    assert sandbox.processes.input(proc.process_id, "abc\n") >= 0
    done = sandbox.processes.wait(proc.process_id, LEADER)
    assert done.state is ManagedProcessState.EXITED
    assert done.exit_code == 5
    assert done.leader_exited is True

    events = drain(sandbox, proc.process_id)
    assert output(events, ManagedProcessStream.STDOUT) == b"hello\ngot:abc\n"
    assert output(events, ManagedProcessStream.STDERR) == b"oops\n"
    assert events[-1].type is ManagedProcessConnectEventType.EXIT
    assert events[-1].exit_code == 5
    seqs = [e.sequence for e in events if e.type is ManagedProcessConnectEventType.DATA]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

    # Reconnecting after the first data event replays only what came later.
    later = drain(sandbox, proc.process_id, after=seqs[0])
    assert [e.sequence for e in later if e.type is ManagedProcessConnectEventType.DATA] == seqs[1:]

    assert proc.process_id in {p.process_id for p in sandbox.processes.list()}
    got = sandbox.processes.get(proc.process_id)
    assert (got.state, got.exit_code, got.command) == (ManagedProcessState.EXITED, 5, "sh")
    assert got.output.newest_sequence >= got.output.oldest_sequence


def test_close_standard_input_ends_cat(sandbox) -> None:
    proc = sandbox.processes.create(ManagedProcessCreateRequest(command="cat"))
    sandbox.processes.input_bytes(proc.process_id, b"\x00bytes\xff")
    sandbox.processes.close_standard_input(proc.process_id)
    done = sandbox.processes.wait(proc.process_id, TREE)
    assert done.exit_code == 0 and done.tree_exited is True
    assert output(drain(sandbox, proc.process_id)) == b"\x00bytes\xff"


def test_pty_process_resize_and_input(sandbox) -> None:
    proc = sandbox.processes.create(
        ManagedProcessCreateRequest(command="sh", pty=PTYSize(rows=24, cols=80))
    )
    assert proc.kind is ManagedProcessKind.PTY
    sandbox.processes.resize(proc.process_id, PTYSize(rows=40, cols=100))
    sandbox.processes.input(proc.process_id, "stty size; exit 3\n")
    done = sandbox.processes.wait(proc.process_id, LEADER)
    assert done.exit_code == 3
    text = output(drain(sandbox, proc.process_id), ManagedProcessStream.PTY)
    assert b"40 100" in text


def test_signal_terminates_the_process(sandbox) -> None:
    proc = sandbox.processes.create(ManagedProcessCreateRequest(command="sleep", arguments=["60"]))
    sandbox.processes.signal(proc.process_id, ManagedProcessSignal.TERMINATE)
    done = sandbox.processes.wait(proc.process_id, LEADER)
    assert done.state in (ManagedProcessState.EXITED, ManagedProcessState.FAILED)
    assert done.signal == "SIGTERM"


def test_wait_times_out_with_408_then_delete_stops_the_tree(sandbox) -> None:
    proc = sandbox.processes.create(
        ManagedProcessCreateRequest(command="sh", arguments=["-c", "sleep 60 & sleep 60; wait"])
    )
    expect_api_error(
        lambda: sandbox.processes.wait(
            proc.process_id,
            ManagedProcessWaitOptions(scope=ManagedProcessWaitScope.TREE, wait_timeout=0.2, disable_retry=True),
        ),
        408,
        {"wait": "timed out waiting for process"},
    )
    final = sandbox.processes.delete(proc.process_id, ManagedProcessDeleteOptions(grace_period=0.5))
    assert final.process_id == proc.process_id
    done = sandbox.processes.wait(proc.process_id, TREE)
    assert done.tree_exited is True
    assert done.state in (ManagedProcessState.EXITED, ManagedProcessState.FAILED)


def test_unknown_process_is_404(sandbox) -> None:
    expect_api_error(lambda: sandbox.processes.get("proc_does_not_exist"), 404)
