"""Warm exec worker for `cargo bench --bench compare`: the official Python SDK
(createos-sandbox) in one long-lived process, so interpreter start-up is not measured.

    python exec_worker.py          env: COS_BENCH_BASE_URL, COS_BENCH_API_KEY

Protocol, one line each way:  "init <sandbox id>" -> "ready <sdk version>";
"exec" -> "ok <nanoseconds>" (one run_command("true") timed inside this process);
anything failing -> "err <message>".
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import time

from createos import Client, RunCommandRequest


def main() -> int:
    client = Client(api_key=os.environ["COS_BENCH_API_KEY"], base_url=os.environ["COS_BENCH_BASE_URL"])
    version = importlib.metadata.version("createos-sandbox")
    sandbox = None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "init" and len(words) == 2:
                sandbox = client.get_sandbox(words[1])
                answer = f"ready {version}"
            elif words[0] == "exec":
                if sandbox is None:
                    raise RuntimeError("exec before init")
                started = time.perf_counter_ns()
                out = sandbox.run_command(RunCommandRequest(command="true", arguments=[]))
                elapsed = time.perf_counter_ns() - started
                if out.result.exit_code != 0 or out.result.error_message:
                    raise RuntimeError(f"true failed: exit {out.result.exit_code} {out.result.error_message}")
                answer = f"ok {elapsed}"
            else:
                raise RuntimeError(f"unknown request {words[0]!r}")
        except Exception as err:  # every failure becomes one protocol line
            answer = "err " + " ".join(str(err).split())
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
