"""Helpers for the Python SDK interop suite.

The client is built the way the SDK's README says: `Client()` reads CREATEOS_API_KEY and
CREATEOS_SANDBOX_BASE_URL. Every sandbox a test creates goes through `tracker`, which
destroys it at the end so the emulator is left with nothing live.
"""

from __future__ import annotations

import json
import os
import random
import string
import time
from typing import Any

import httpx
import pytest

from createos import APIError, Client, CreateSandboxRequest, SandboxInstance, SandboxStatus


def _require_env(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        pytest.exit(f"{name} is not set (run the suite through interop/run.sh)", returncode=2)
    return value


BASE_URL = _require_env("CREATEOS_SANDBOX_BASE_URL").rstrip("/")
_require_env("CREATEOS_API_KEY")


class MockApi:
    """The emulator's /_mock API (plain JSON, not JSend; it needs the emulator's key)."""

    def __init__(self, base_url: str) -> None:
        self._http = httpx.Client(
            base_url=f"{base_url}/_mock", headers={"X-Api-Key": os.environ["CREATEOS_API_KEY"]}, timeout=30
        )

    def call(self, method: str, path: str, body: Any = None) -> Any:
        response = self._http.request(method, path, json=body)
        assert response.is_success, f"/_mock{path} answered {response.status_code}: {response.text}"
        return response.json() if response.content else None

    def add_fault(self, rule: str) -> Any:
        return self.call("POST", "/faults", {"rule": rule})

    def clear_faults(self) -> None:
        self.call("DELETE", "/faults")

    def stats(self) -> dict[str, Any]:
        return self.call("GET", "/stats")

    def new_tenant(self) -> dict[str, str]:
        return self.call("POST", "/tenants")

    def close(self) -> None:
        self._http.close()


def unique_name(prefix: str) -> str:
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=6))
    return f"{prefix}-{int(time.time() * 1000):x}-{suffix}"


class SandboxTracker:
    """Creates sandboxes and destroys every one of them on cleanup."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._ids: list[str] = []

    def add(self, sandbox: SandboxInstance) -> SandboxInstance:
        self._ids.append(sandbox.id)
        return sandbox

    def create(self, request: CreateSandboxRequest) -> SandboxInstance:
        return self.add(self._client.create_sandbox(request))

    def destroy_all(self) -> None:
        failures = []
        for sandbox_id in self._ids:
            try:
                sandbox = self._client.get_sandbox(sandbox_id)
                if sandbox.status != SandboxStatus.DESTROYED:
                    sandbox.destroy()
                    sandbox.wait_until_destroyed()
            except APIError as error:
                if error.status_code != 404:
                    failures.append(f"{sandbox_id}: {error}")
            except Exception as error:  # noqa: BLE001 - report every cleanup failure
                failures.append(f"{sandbox_id}: {error!r}")
        self._ids.clear()
        assert not failures, f"cleanup of sandboxes failed: {failures}"


def api_error_data(error: APIError) -> Any:
    """The JSend `data` of an error body (None when the body is not a fail envelope)."""
    try:
        envelope = json.loads(error.body)
    except ValueError:
        return None
    if envelope.get("status") != "fail":
        return None
    return envelope.get("data")


def header(error: APIError, name: str) -> str | None:
    for key, value in error.headers.items():
        if key.lower() == name.lower():
            return value
    return None


def expect_api_error(call, status: int, fail_data: dict[str, Any] | None = None) -> APIError:
    """Runs `call()`, asserts it raises APIError with `status` (and, when given, the listed
    keys of the JSend fail data) and an X-Request-Id; returns the error."""
    with pytest.raises(APIError) as info:
        call()
    error = info.value
    assert error.status_code == status, f"expected HTTP {status}, got {error}"
    assert error.request_id, "error carries no X-Request-Id"
    if fail_data is not None:
        data = api_error_data(error)
        assert isinstance(data, dict), f"not a fail envelope: {error.body!r}"
        for key, value in fail_data.items():
            assert data.get(key) == value, f"fail data {data!r}"
    return error
