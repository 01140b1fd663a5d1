"""Exec (buffered and streamed), files, egress and bandwidth through the Python SDK."""

from __future__ import annotations

import pytest

from createos import (
    CommandError,
    CreateSandboxRequest,
    ExecStreamEventType,
    RunCommandRequest,
)
from support import SandboxTracker, expect_api_error


@pytest.fixture(scope="module")
def sandbox(tracker: SandboxTracker, shape):
    return tracker.create(
        CreateSandboxRequest(shape=shape.id, environment_variables={"INTEROP_FOO": "bar baz"})
    )


def run(sandbox, command: str, *arguments: str):
    return sandbox.run_command(RunCommandRequest(command=command, arguments=list(arguments)))


def test_run_command_returns_output_exit_code_and_timing(sandbox) -> None:
    out = run(sandbox, "sh", "-c", "echo out; echo err >&2; exit 3")
    assert out.result.standard_output == "out\n"
    assert out.result.standard_error == "err\n"
    assert out.result.exit_code == 3
    assert out.result.error_message == ""
    assert out.execution_milliseconds >= 0


def test_run_command_passes_argv_verbatim_and_exports_envs(sandbox) -> None:
    assert run(sandbox, "printf", "%s|", "a b", "$HOME", "*").result.standard_output == "a b|$HOME|*|"
    env = run(sandbox, "sh", "-c", 'printf "%s" "$INTEROP_FOO"')
    assert env.result.standard_output == "bar baz"


def test_missing_program_is_a_command_failure(sandbox) -> None:
    result = run(sandbox, "/definitely/not/here").result
    assert result.exit_code != 0 or result.error_message


def test_shell_runs_bash_and_raises_on_failure(sandbox) -> None:
    assert sandbox.shell("echo one | tr a-z A-Z").result.standard_output == "ONE\n"
    with pytest.raises(CommandError) as info:
        sandbox.shell("echo nope >&2; exit 7")
    assert "status 7" in str(info.value)
    assert "nope" in str(info.value)


def test_stream_command_yields_events_in_order(sandbox) -> None:
    request = RunCommandRequest(
        command="sh",
        arguments=["-c", "echo first; sleep 0.2; echo second >&2; sleep 0.2; echo third; exit 4"],
    )
    with sandbox.stream_command(request) as stream:
        events = [e for e in stream if e.type is not ExecStreamEventType.HEARTBEAT]
    stdout = "".join(e.data for e in events if e.type is ExecStreamEventType.STDOUT)
    stderr = "".join(e.data for e in events if e.type is ExecStreamEventType.STDERR)
    assert stdout == "first\nthird\n"
    assert stderr == "second\n"
    assert events[-1].type is ExecStreamEventType.EXIT
    assert events[-1].exit_code == 4
    assert sum(e.type is ExecStreamEventType.EXIT for e in events) == 1
    kinds = [e.type for e in events]
    assert kinds.index(ExecStreamEventType.STDOUT) < kinds.index(ExecStreamEventType.STDERR)


def test_stream_command_can_stop_early(sandbox) -> None:
    request = RunCommandRequest(command="sh", arguments=["-c", "echo tick; sleep 5"])
    with sandbox.stream_command(request) as stream:
        for event in stream:
            if event.type is ExecStreamEventType.STDOUT:
                break
    assert run(sandbox, "true").result.exit_code == 0


def test_files_round_trip_binary_data(sandbox) -> None:
    payload = bytes((i * 7 + 3) % 256 for i in range(4096))
    sandbox.files.upload("/root/interop/nested/blob.bin", payload)
    with sandbox.files.download("/root/interop/nested/blob.bin") as download:
        assert download.read() == payload

    sandbox.files.upload("/root/interop/hello.txt", b"hello from python\n")
    assert run(sandbox, "cat", "/root/interop/hello.txt").result.standard_output == "hello from python\n"

    sandbox.files.upload("/root/interop/hello.txt", b"overwritten")
    with sandbox.files.download("/root/interop/hello.txt") as download:
        assert download.read() == b"overwritten"


def test_upload_from_a_file_object(sandbox, tmp_path) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(b"\x00\x01streamed\xff" * 1000)
    with source.open("rb") as handle:
        sandbox.files.upload("/tmp/interop-stream.bin", handle)
    with sandbox.files.download("/tmp/interop-stream.bin") as download:
        assert download.read() == source.read_bytes()


def test_file_written_by_exec_downloads_unchanged(sandbox) -> None:
    sandbox.shell("printf 'made by exec' > /tmp/interop-exec.txt")
    with sandbox.files.download("/tmp/interop-exec.txt") as download:
        assert download.read() == b"made by exec"


def test_file_errors(sandbox) -> None:
    expect_api_error(
        lambda: sandbox.files.download("/root/interop/missing.txt"), 404, {"path": "file not found"}
    )
    expect_api_error(lambda: sandbox.files.upload("relative/x.txt", b"x"), 400)


def test_egress_get_and_set(client, sandbox) -> None:
    view = sandbox.egress()
    assert (view.id, view.egress_rules) == (sandbox.id, [])
    rules = ["api.example.com:443", "*.example.org", "10.1.0.0/16"]
    assert sandbox.set_egress(rules).egress_rules == rules
    assert sandbox.egress().egress_rules == rules
    assert client.get_sandbox(sandbox.id).data.egress_rules == rules
    assert sandbox.set_egress([]).egress_rules == []


def test_egress_rejects_a_malformed_rule(sandbox) -> None:
    expect_api_error(lambda: sandbox.set_egress(["example.com:99999"]), 400)
    assert sandbox.egress().egress_rules == []


def test_bandwidth_and_recharge(sandbox) -> None:
    bw = sandbox.bandwidth()
    assert bw.id == sandbox.id
    assert bw.quota_bytes > 0
    assert bw.remaining_bytes == bw.quota_bytes - bw.used_bytes
    assert bw.capped is False
    added = 1024 * 1024
    after = sandbox.recharge_bandwidth(added)
    assert after.quota_bytes == bw.quota_bytes + added
    assert after.remaining_bytes == after.quota_bytes - after.used_bytes
    assert sandbox.bandwidth().quota_bytes == bw.quota_bytes + added
    expect_api_error(lambda: sandbox.recharge_bandwidth(0), 400)
