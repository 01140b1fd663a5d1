#!/usr/bin/env python3
"""Consistency checks for api-spec/openapi.yaml beyond what an OpenAPI validator sees.

Usage: python3 api-spec/check_spec.py [openapi.yaml] [OPERATIONS.md]   (needs PyYAML)

Checks that every canonical operation of OPERATIONS.md exists exactly once with its method,
path and `x-endpoint`, that there are no extra operations, that every response (inline or
shared) documents X-Request-Id, that every local $ref resolves, that path parameters match
their templates, and that streaming / upgrade routes carry their `x-stream` / `x-upgrade` tags.
Exits 1 with one line per problem.
"""
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
METHODS = ("get", "put", "post", "patch", "delete")
COMPUTER_PREFIX = "/v1/sandboxes/{id}/computer"
UNAUTHENTICATED = {"healthz", "readyz", "listShapes", "listRootfs"}


def load_operations(path):
    """Parse the canonical table: `E<n> METHOD PATH operationId` per line."""
    ops = []
    for line in Path(path).read_text().splitlines():
        m = re.match(r"^(E\d+)\s+(GET|PUT|POST|PATCH|DELETE)\s+(\S+)\s+(\S+)\s*$", line)
        if m:
            endpoint, method, route, op_id = m.groups()
            if route.startswith("C/"):
                route = COMPUTER_PREFIX + route[1:]
            ops.append((endpoint, method.lower(), route, op_id))
    return ops


def resolve(doc, ref):
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def walk_refs(doc, node, where, problems):
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#/"):
                problems.append(f"{where}: non-local $ref {ref}")
            elif resolve(doc, ref) is None:
                problems.append(f"{where}: unresolved $ref {ref}")
        for key, value in node.items():
            walk_refs(doc, value, f"{where}/{key}", problems)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            walk_refs(doc, value, f"{where}/{i}", problems)


def deref(doc, node):
    while isinstance(node, dict) and "$ref" in node:
        node = resolve(doc, node["$ref"])
    return node


def check(spec_path, ops_path):
    doc = yaml.safe_load(Path(spec_path).read_text())
    problems = []
    walk_refs(doc, doc, "#", problems)

    found = {}
    for route, item in doc.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                op = item[method]
                found.setdefault(op.get("operationId"), []).append((method, route, op, item))

    canonical = load_operations(ops_path)
    if len(canonical) != 107:
        problems.append(f"{ops_path}: expected 107 operations, parsed {len(canonical)}")
    expected_ids = set()
    for endpoint, method, route, op_id in canonical:
        expected_ids.add(op_id)
        hits = found.get(op_id, [])
        if len(hits) != 1:
            problems.append(f"{op_id}: defined {len(hits)} times (want exactly 1)")
            continue
        got_method, got_route, op, _ = hits[0]
        if (got_method, got_route) != (method, route):
            problems.append(f"{op_id}: {got_method.upper()} {got_route}, want {method.upper()} {route}")
        if op.get("x-endpoint") != endpoint:
            problems.append(f"{op_id}: x-endpoint {op.get('x-endpoint')!r}, want {endpoint}")
    for op_id in found:
        if op_id not in expected_ids:
            problems.append(f"{op_id}: not a canonical operation")

    tag_names = {t["name"] for t in doc.get("tags", [])}
    for op_id, hits in found.items():
        for method, route, op, item in hits:
            where = f"{op_id} ({method.upper()} {route})"
            for field in ("summary", "description", "tags"):
                if not op.get(field):
                    problems.append(f"{where}: missing {field}")
            for tag in op.get("tags", []):
                if tag not in tag_names:
                    problems.append(f"{where}: undeclared tag {tag}")
            open_route = op.get("security") == []
            if open_route != (op_id in UNAUTHENTICATED):
                problems.append(f"{where}: security [] must be set exactly on {sorted(UNAUTHENTICATED)}")

            params = [deref(doc, p) for p in item.get("parameters", []) + op.get("parameters", [])]
            declared = {p["name"] for p in params if p and p.get("in") == "path"}
            templated = set(re.findall(r"{([^}]+)}", route))
            if declared != templated:
                problems.append(f"{where}: path params {sorted(declared)} != template {sorted(templated)}")

            media = set()
            for code, resp in op.get("responses", {}).items():
                if not isinstance(code, str):
                    problems.append(f"{where}: response key {code!r} must be a quoted string")
                resp = deref(doc, resp)
                if "X-Request-Id" not in (resp or {}).get("headers", {}):
                    problems.append(f"{where}: response {code} lacks X-Request-Id")
                media.update((resp or {}).get("content", {}).keys())
            if "application/x-ndjson" in media and op.get("x-stream") != "ndjson":
                problems.append(f"{where}: NDJSON response without x-stream: ndjson")
            if "101" in op.get("responses", {}) and op.get("x-upgrade") not in ("tcp-tunnel", "websocket"):
                problems.append(f"{where}: 101 response without x-upgrade")
    return problems


def main():
    spec = sys.argv[1] if len(sys.argv) > 1 else HERE / "openapi.yaml"
    ops = sys.argv[2] if len(sys.argv) > 2 else HERE / "OPERATIONS.md"
    problems = check(spec, ops)
    for line in problems:
        print(line)
    if problems:
        sys.exit(1)
    print(f"{spec}: 107 canonical operations present, all checks passed")


if __name__ == "__main__":
    main()
