#!/usr/bin/env python3
"""Tests for cos_guest.py, driven only through its stdin/stdout protocol.

Run: python3 guest/test_cos_guest.py   (or python3 -m unittest guest/test_cos_guest.py -v)

Every test runs the helper as a subprocess in a private temp directory.  The
glob/grep tests run the pure-Python engine (COS_GUEST_NO_RG=1) always, and
ripgrep too when `rg` is installed, and require identical answers.
"""

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import unittest

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cos_guest.py")
MIB = 1024 * 1024
HAVE_RG = shutil.which("rg") is not None
ENGINES = ["python"] + (["rg"] if HAVE_RG else [])


def engine_env(engine):
    env = dict(os.environ)
    env.pop("RIPGREP_CONFIG_PATH", None)
    if engine == "python":
        env["COS_GUEST_NO_RG"] = "1"
    else:
        env.pop("COS_GUEST_NO_RG", None)
    return env


def run_raw(payload, env=None, timeout=60):
    """Run the helper on raw stdin bytes; return (answer, completed process)."""
    proc = subprocess.run([sys.executable, HELPER], input=payload, capture_output=True,
                          env=env or engine_env("python"), timeout=timeout)
    lines = proc.stdout.decode("utf-8").splitlines()
    assert proc.returncode == 0, "exit %d, stderr: %s" % (proc.returncode, proc.stderr)
    assert len(lines) == 1, "expected one JSON line, got %r" % proc.stdout
    return json.loads(lines[0]), proc


class GuestCase(unittest.TestCase):
    """Base: a temp dir as cwd and helpers to call operations."""

    def setUp(self):
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix="cos-guest-test-"))
        self.addCleanup(shutil.rmtree, self.dir, True)

    def call(self, op, args=None, cwd=None, engine="python"):
        request = {"v": 1, "op": op, "cwd": cwd or self.dir, "args": args or {}}
        answer, _ = run_raw(json.dumps(request).encode(), env=engine_env(engine))
        self.assertEqual(answer.get("v"), 1)
        return answer

    def ok(self, op, args=None, **kw):
        answer = self.call(op, args, **kw)
        self.assertIn("result", answer, "expected success, got %r" % answer)
        return answer["result"]

    def err(self, op, args, code, **kw):
        answer = self.call(op, args, **kw)
        self.assertIn("error", answer, "expected error %s, got %r" % (code, answer))
        self.assertEqual(answer["error"]["code"], code, answer["error"])
        self.assertTrue(answer["error"]["message"])
        return answer["error"]

    def path(self, rel):
        return os.path.join(self.dir, rel)

    def put(self, rel, data, mode=None):
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
        if mode is not None:
            os.chmod(full, mode)
        return full

    def get(self, rel):
        with open(self.path(rel), "rb") as handle:
            return handle.read()

    def temp_leftovers(self, directory=None):
        found = []
        for base, _, files in os.walk(directory or self.dir):
            found.extend(os.path.join(base, f) for f in files if f.startswith(".cos-"))
        return found


# ---------------------------------------------------------------------------
# Protocol and path safety
# ---------------------------------------------------------------------------


class ProtocolTests(GuestCase):
    def test_unsupported_version(self):
        answer, _ = run_raw(json.dumps({"v": 2, "op": "read", "cwd": "/", "args": {}}).encode())
        self.assertEqual(answer["error"]["code"], "unsupported_version")

    def test_boolean_is_not_a_version(self):
        answer, _ = run_raw(json.dumps({"v": True, "op": "stat", "cwd": "/", "args": {"path": "/"}}).encode())
        self.assertEqual(answer["error"]["code"], "unsupported_version")

    def test_unknown_op(self):
        self.assertEqual(self.err("frobnicate", {}, "unknown_op")["code"], "unknown_op")

    def test_invalid_json_is_answered(self):
        answer, proc = run_raw(b"{not json")
        self.assertEqual(answer["error"]["code"], "bad_request")
        self.assertEqual(proc.returncode, 0)

    def test_unknown_request_field(self):
        body = {"v": 1, "op": "stat", "cwd": self.dir, "args": {"path": "."}, "extra": 1}
        answer, _ = run_raw(json.dumps(body).encode())
        self.assertEqual(answer["error"]["code"], "bad_request")

    def test_relative_cwd_refused(self):
        answer, _ = run_raw(json.dumps({"v": 1, "op": "stat", "cwd": "tmp", "args": {"path": "."}}).encode())
        self.assertEqual(answer["error"]["code"], "bad_request")

    def test_unknown_argument_refused(self):
        self.put("a.txt", "x\n")
        error = self.err("read", {"path": "a.txt", "bogus": 1}, "bad_args")
        self.assertIn("bogus", error["message"])

    def test_argument_types_validated(self):
        self.put("a.txt", "x\n")
        self.err("read", {"path": "a.txt", "offset": "2"}, "bad_args")
        self.err("read", {"path": "a.txt", "limit": 2001}, "bad_args")
        self.err("read", {"path": "a.txt", "offset": 0}, "bad_args")
        self.err("read", {"path": "a.txt", "limit": True}, "bad_args")
        self.err("read", {}, "bad_args")
        self.err("edit", {"path": "a.txt", "oldString": "x", "newString": "y", "replaceAll": "yes"}, "bad_args")
        self.err("manifest", {"excludes": "node_modules"}, "bad_args")

    def test_null_means_default(self):
        self.put("a.txt", "x\n")
        result = self.ok("read", {"path": "a.txt", "offset": None, "limit": None})
        self.assertEqual(result["content"], "1: x")

    def test_nul_in_path_refused(self):
        self.err("read", {"path": "a\u0000b"}, "bad_path")

    def test_escape_above_root_refused(self):
        depth = self.dir.count("/")
        self.err("read", {"path": "../" * (depth + 1) + "etc/passwd"}, "bad_path")
        self.err("stat", {"path": "/.."}, "bad_path")

    def test_dotdot_resolved_lexically(self):
        self.put("a/b.txt", "inside\n")
        result = self.ok("read", {"path": "a/../a/./b.txt"})
        self.assertEqual(result["path"], self.path("a/b.txt"))

    def test_relative_paths_use_cwd(self):
        self.put("sub/f.txt", "hello\n")
        result = self.ok("read", {"path": "f.txt"}, cwd=self.path("sub"))
        self.assertEqual(result["content"], "1: hello")

    def test_non_utf8_names_are_answered_as_valid_json(self):
        os.makedirs(self.path("d"))
        with open(os.path.join(os.fsencode(self.path("d")), b"bad\xffname"), "wb") as handle:
            handle.write(b"x")
        result = self.ok("read", {"path": "d"})
        self.assertEqual(result["entries"], ["bad\ufffdname"])


# ---------------------------------------------------------------------------
# read
# ---------------------------------------------------------------------------


class ReadTests(GuestCase):
    def test_lines_numbered_with_offset_and_limit(self):
        self.put("f.txt", "".join("line %d\n" % i for i in range(1, 11)))
        result = self.ok("read", {"path": "f.txt", "offset": 3, "limit": 2})
        self.assertEqual(result["content"], "3: line 3\n4: line 4")
        self.assertEqual(result["total_lines"], 10)
        self.assertTrue(result["truncated"])
        self.assertEqual(result["next_offset"], 5)
        whole = self.ok("read", {"path": "f.txt"})
        self.assertFalse(whole["truncated"])
        self.assertEqual(whole["content"].splitlines()[-1], "10: line 10")

    def test_default_limit_is_2000_lines(self):
        self.put("big.txt", "x\n" * 2500)
        result = self.ok("read", {"path": "big.txt"})
        self.assertEqual(result["lines"], 2000)
        self.assertEqual(result["total_lines"], 2500)
        self.assertTrue(result["truncated"])

    def test_offset_past_end(self):
        self.put("f.txt", "a\nb\n")
        self.err("read", {"path": "f.txt", "offset": 5}, "out_of_range")

    def test_empty_file(self):
        self.put("e.txt", "")
        result = self.ok("read", {"path": "e.txt"})
        self.assertEqual((result["content"], result["total_lines"]), ("", 0))

    def test_non_utf8_refused(self):
        self.put("latin1.txt", b"caf\xe9\n")
        error = self.err("read", {"path": "latin1.txt"}, "binary_file")
        self.assertIn("transfer", error["message"])

    def test_nul_byte_refused(self):
        self.put("nul.bin", b"abc\x00def")
        self.err("read", {"path": "nul.bin"}, "binary_file")

    def test_one_mib_accepted_one_more_byte_refused(self):
        self.put("exact.txt", b"a" * (MIB - 1) + b"\n")
        self.assertEqual(self.ok("read", {"path": "exact.txt"})["total_lines"], 1)
        self.put("over.txt", b"a" * MIB + b"\n")
        error = self.err("read", {"path": "over.txt"}, "too_large")
        self.assertIn(str(MIB + 1), error["message"])

    def test_fifo_does_not_hang(self):
        os.mkfifo(self.path("pipe"))
        self.err("read", {"path": "pipe"}, "not_a_file")

    def test_missing_file(self):
        self.err("read", {"path": "nope.txt"}, "no_such_file")

    def test_directory_listing(self):
        self.put("d/b.txt", "")
        self.put("d/a/inner.txt", "")
        self.put("d/.hidden", "")
        result = self.ok("read", {"path": "d"})
        self.assertEqual(result["type"], "directory")
        self.assertEqual(result["entries"], [".hidden", "a/", "b.txt"])
        self.assertFalse(result["truncated"])

    def test_directory_listing_capped_at_2000(self):
        for i in range(2005):
            open(self.path("n%05d" % i), "w").close()
        result = self.ok("read", {"path": "."})
        self.assertEqual(len(result["entries"]), 2000)
        self.assertTrue(result["truncated"])
        self.assertEqual(result["total_entries"], 2005)

    def test_crlf_displayed_without_carriage_returns(self):
        self.put("w.txt", b"one\r\ntwo\r\n")
        self.assertEqual(self.ok("read", {"path": "w.txt"})["content"], "1: one\n2: two")


# ---------------------------------------------------------------------------
# write
# ---------------------------------------------------------------------------


class WriteTests(GuestCase):
    def test_creates_parents_with_0644(self):
        result = self.ok("write", {"path": "deep/er/new.txt", "content": "héllo\n"})
        self.assertEqual(result["bytes"], len("héllo\n".encode()))
        self.assertTrue(result["created"])
        self.assertEqual(self.get("deep/er/new.txt"), "héllo\n".encode())
        self.assertEqual(stat.S_IMODE(os.stat(self.path("deep/er/new.txt")).st_mode), 0o644)
        self.assertEqual(self.temp_leftovers(), [])

    def test_preserves_existing_mode(self):
        self.put("run.sh", "#!/bin/sh\n", mode=0o750)
        result = self.ok("write", {"path": "run.sh", "content": "#!/bin/sh\necho hi\n"})
        self.assertFalse(result["created"])
        self.assertEqual(stat.S_IMODE(os.stat(self.path("run.sh")).st_mode), 0o750)
        self.assertEqual(self.get("run.sh"), b"#!/bin/sh\necho hi\n")

    def test_write_through_symlink_keeps_link(self):
        self.put("real.txt", "old\n")
        os.symlink("real.txt", self.path("link.txt"))
        self.ok("write", {"path": "link.txt", "content": "new\n"})
        self.assertTrue(os.path.islink(self.path("link.txt")))
        self.assertEqual(self.get("real.txt"), b"new\n")

    def test_directory_target_refused(self):
        os.makedirs(self.path("d"))
        self.err("write", {"path": "d", "content": "x"}, "is_directory")

    def test_parent_is_a_file(self):
        self.put("file", "x")
        self.err("write", {"path": "file/child.txt", "content": "x"}, "not_a_directory")


# ---------------------------------------------------------------------------
# edit
# ---------------------------------------------------------------------------


class EditTests(GuestCase):
    def test_unique_replacement(self):
        self.put("f.py", "a = 1\nb = 2\n", mode=0o600)
        result = self.ok("edit", {"path": "f.py", "oldString": "b = 2", "newString": "b = 3"})
        self.assertEqual(result["replacements"], 1)
        self.assertEqual(self.get("f.py"), b"a = 1\nb = 3\n")
        self.assertEqual(stat.S_IMODE(os.stat(self.path("f.py")).st_mode), 0o600)
        self.assertEqual(self.temp_leftovers(), [])

    def test_two_occurrences_refused_and_file_unchanged(self):
        self.put("f.py", "x = 1\nx = 1\n")
        before = os.stat(self.path("f.py"))
        error = self.err("edit", {"path": "f.py", "oldString": "x = 1", "newString": "x = 2"}, "ambiguous")
        self.assertEqual(error["details"]["count"], 2)
        self.assertIn("2", error["message"])
        self.assertEqual(self.get("f.py"), b"x = 1\nx = 1\n")
        after = os.stat(self.path("f.py"))
        self.assertEqual((before.st_ino, before.st_mtime_ns), (after.st_ino, after.st_mtime_ns))

    def test_replace_all(self):
        self.put("f.py", "x = 1\nx = 1\ny\n")
        result = self.ok("edit", {"path": "f.py", "oldString": "x = 1", "newString": "x = 2",
                                  "replaceAll": True})
        self.assertEqual(result["replacements"], 2)
        self.assertEqual(self.get("f.py"), b"x = 2\nx = 2\ny\n")

    def test_not_found(self):
        self.put("f.py", "hello\n")
        self.err("edit", {"path": "f.py", "oldString": "absent", "newString": "x"}, "not_found")

    def test_empty_and_identical_strings_refused(self):
        self.put("f.py", "hello\n")
        self.err("edit", {"path": "f.py", "oldString": "", "newString": "x"}, "bad_args")
        self.err("edit", {"path": "f.py", "oldString": "hello", "newString": "hello"}, "bad_args")
        self.assertEqual(self.get("f.py"), b"hello\n")

    def test_crlf_preserved_when_strings_use_lf(self):
        self.put("win.txt", b"first\r\nsecond\r\nthird\r\n")
        self.ok("edit", {"path": "win.txt", "oldString": "first\nsecond",
                         "newString": "first\ninserted\nsecond"})
        self.assertEqual(self.get("win.txt"), b"first\r\ninserted\r\nsecond\r\nthird\r\n")

    def test_lf_file_stays_lf_when_strings_use_crlf(self):
        self.put("unix.txt", b"a\nb\n")
        self.ok("edit", {"path": "unix.txt", "oldString": "a\r\nb", "newString": "a\r\nx\r\nb"})
        self.assertEqual(self.get("unix.txt"), b"a\nx\nb\n")

    def test_binary_file_refused(self):
        self.put("blob", b"\xff\xfe\x00x")
        self.err("edit", {"path": "blob", "oldString": "x", "newString": "y"}, "binary_file")

    def test_concurrent_edits_never_tear_or_leak_temp_files(self):
        markers = ["MARK-%02d" % i for i in range(20)]
        self.put("shared.txt", "".join(m + "\n" for m in markers))
        valid_lines = [{m, m.replace("MARK", "DONE")} for m in markers]
        torn = []
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                data = self.get("shared.txt").decode()
                lines = data.split("\n")
                if lines[-1] != "" or len(lines) != 21 or any(
                        line not in valid_lines[i] for i, line in enumerate(lines[:-1])):
                    torn.append(data)

        watcher = threading.Thread(target=watch)
        watcher.start()
        procs = []
        for marker in markers:
            request = {"v": 1, "op": "edit", "cwd": self.dir, "args": {
                "path": "shared.txt", "oldString": marker,
                "newString": marker.replace("MARK", "DONE")}}
            proc = subprocess.Popen([sys.executable, HELPER], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, env=engine_env("python"))
            procs.append((proc, json.dumps(request).encode()))
        answers = [json.loads(p.communicate(body, timeout=120)[0]) for p, body in procs]
        stop.set()
        watcher.join()
        self.assertEqual([p.returncode for p, _ in procs], [0] * 20)
        self.assertEqual([a.get("result", {}).get("replacements") for a in answers], [1] * 20, answers)
        self.assertEqual(torn, [])
        final = self.get("shared.txt").decode().split("\n")
        self.assertEqual(len(final), 21)
        self.assertTrue(all(line in valid_lines[i] for i, line in enumerate(final[:-1])))
        self.assertTrue(any(line.startswith("DONE") for line in final))
        self.assertEqual(self.temp_leftovers(), [])


# ---------------------------------------------------------------------------
# patch
# ---------------------------------------------------------------------------


def patch_text(*sections):
    return "*** Begin Patch\n" + "".join(sections) + "*** End Patch\n"


class PatchTests(GuestCase):
    def test_add_update_delete_move(self):
        self.put("keep.py", "def a():\n    return 1\n\ndef b():\n    return 2\n", mode=0o640)
        self.put("gone.txt", "bye\n")
        self.put("old/name.txt", "one\ntwo\n", mode=0o600)
        patch = patch_text(
            "*** Add File: new/added.txt\n+hello\n+world\n",
            "*** Update File: keep.py\n@@ def b():\n-    return 2\n+    return 20\n",
            "*** Delete File: gone.txt\n",
            "*** Update File: old/name.txt\n*** Move to: moved/name.txt\n@@\n one\n-two\n+three\n",
        )
        result = self.ok("patch", {"patch": patch})
        self.assertEqual([(r["action"], r["path"]) for r in result], [
            ("add", self.path("new/added.txt")), ("update", self.path("keep.py")),
            ("delete", self.path("gone.txt")), ("move", self.path("moved/name.txt"))])
        self.assertEqual(result[3]["from"], self.path("old/name.txt"))
        self.assertEqual(self.get("new/added.txt"), b"hello\nworld\n")
        self.assertEqual(self.get("keep.py"), b"def a():\n    return 1\n\ndef b():\n    return 20\n")
        self.assertEqual(stat.S_IMODE(os.stat(self.path("keep.py")).st_mode), 0o640)
        self.assertFalse(os.path.exists(self.path("gone.txt")))
        self.assertFalse(os.path.exists(self.path("old/name.txt")))
        self.assertEqual(self.get("moved/name.txt"), b"one\nthree\n")
        self.assertEqual(stat.S_IMODE(os.stat(self.path("moved/name.txt")).st_mode), 0o600)
        self.assertEqual(self.temp_leftovers(), [])

    def test_third_file_failing_changes_nothing(self):
        originals = {"a.txt": b"alpha\n", "b.txt": b"beta\n", "c.txt": b"gamma\n"}
        for name, data in originals.items():
            self.put(name, data)
        patch = patch_text(
            "*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n",
            "*** Update File: b.txt\n@@\n-beta\n+BETA\n",
            "*** Update File: c.txt\n@@\n-delta\n+DELTA\n",
        )
        error = self.err("patch", {"patch": patch}, "patch_failed")
        self.assertIn(self.path("c.txt"), error["message"])
        self.assertIn("hunk 1", error["message"])
        self.assertEqual(error["details"], {"file": self.path("c.txt"), "hunk": 1})
        for name, data in originals.items():
            self.assertEqual(self.get(name), data)

    def test_later_hunk_failure_keeps_adds_and_deletes_undone(self):
        self.put("victim.txt", "v\n")
        self.put("u.txt", "1\n2\n3\n")
        patch = patch_text(
            "*** Add File: fresh.txt\n+x\n",
            "*** Delete File: victim.txt\n",
            "*** Update File: u.txt\n@@\n-1\n+one\n@@\n-9\n+nine\n",
        )
        error = self.err("patch", {"patch": patch}, "patch_failed")
        self.assertIn("hunk 2", error["message"])
        self.assertFalse(os.path.exists(self.path("fresh.txt")))
        self.assertTrue(os.path.exists(self.path("victim.txt")))
        self.assertEqual(self.get("u.txt"), b"1\n2\n3\n")

    def test_ambiguous_hunk(self):
        self.put("dup.txt", "x\ny\nx\ny\n")
        patch = patch_text("*** Update File: dup.txt\n@@\n x\n-y\n+z\n")
        error = self.err("patch", {"patch": patch}, "patch_failed")
        self.assertIn("2 places", error["message"])
        self.assertEqual(self.get("dup.txt"), b"x\ny\nx\ny\n")

    def test_hint_and_end_of_file_locate_hunks(self):
        self.put("f.txt", "x\ny\nsection\nx\ny\n")
        patch = patch_text("*** Update File: f.txt\n@@ section\n x\n-y\n+Y\n")
        self.ok("patch", {"patch": patch})
        self.assertEqual(self.get("f.txt"), b"x\ny\nsection\nx\nY\n")
        self.put("g.txt", "end\nmid\nend\n")
        patch = patch_text("*** Update File: g.txt\n@@\n-end\n+END\n*** End of File\n")
        self.ok("patch", {"patch": patch})
        self.assertEqual(self.get("g.txt"), b"end\nmid\nEND\n")

    def test_hunks_apply_in_order_after_previous(self):
        self.put("o.txt", "a\nb\nc\nd\n")
        patch = patch_text("*** Update File: o.txt\n@@\n-c\n+C\n@@\n-a\n+A\n")
        error = self.err("patch", {"patch": patch}, "patch_failed")
        self.assertIn("hunk 2", error["message"])
        self.assertEqual(self.get("o.txt"), b"a\nb\nc\nd\n")
        # a second hunk only searches after the first, so repeated text is unique there
        self.put("f.txt", "a\nb\na\nb\n")
        patch = patch_text("*** Update File: f.txt\n@@\n-a\n+A\n b\n a\n@@\n-b\n+B\n")
        self.ok("patch", {"patch": patch})
        self.assertEqual(self.get("f.txt"), b"A\nb\na\nB\n")

    def test_add_existing_and_move_onto_existing_refused(self):
        self.put("there.txt", "x\n")
        self.put("src.txt", "s\n")
        self.err("patch", {"patch": patch_text("*** Add File: there.txt\n+y\n")}, "exists")
        patch = patch_text("*** Update File: src.txt\n*** Move to: there.txt\n@@\n-s\n+t\n")
        self.err("patch", {"patch": patch}, "exists")
        self.assertEqual((self.get("there.txt"), self.get("src.txt")), (b"x\n", b"s\n"))

    def test_file_twice_refused(self):
        self.put("f.txt", "a\n")
        patch = patch_text("*** Update File: f.txt\n@@\n-a\n+b\n", "*** Delete File: ./f.txt\n")
        self.err("patch", {"patch": patch}, "patch_invalid")
        self.assertEqual(self.get("f.txt"), b"a\n")

    def test_delete_requires_regular_file(self):
        os.makedirs(self.path("d"))
        self.err("patch", {"patch": patch_text("*** Delete File: d\n")}, "not_a_file")
        self.err("patch", {"patch": patch_text("*** Delete File: missing\n")}, "no_such_file")

    def test_grammar_errors(self):
        self.err("patch", {"patch": "*** Update File: x\n"}, "patch_invalid")
        self.err("patch", {"patch": "*** Begin Patch\n*** End Patch\n"}, "patch_invalid")
        self.err("patch", {"patch": patch_text("*** Add File: a\nno plus\n")}, "patch_invalid")
        self.err("patch", {"patch": patch_text("*** Frobnicate: a\n")}, "patch_invalid")

    def test_crlf_preserved(self):
        self.put("win.txt", b"one\r\ntwo\r\nthree\r\n")
        self.ok("patch", {"patch": patch_text("*** Update File: win.txt\n@@\n one\n-two\n+TWO\n+2.5\n")})
        self.assertEqual(self.get("win.txt"), b"one\r\nTWO\r\n2.5\r\nthree\r\n")

    def test_missing_final_newline_kept(self):
        self.put("n.txt", b"a\nb")
        self.ok("patch", {"patch": patch_text("*** Update File: n.txt\n@@\n a\n-b\n+c\n+d\n")})
        self.assertEqual(self.get("n.txt"), b"a\nc\nd")

    def test_binary_update_refused(self):
        self.put("b.bin", b"\x00\x01")
        self.err("patch", {"patch": patch_text("*** Update File: b.bin\n@@\n-x\n+y\n")}, "binary_file")


# ---------------------------------------------------------------------------
# glob and grep (both engines)
# ---------------------------------------------------------------------------


def build_search_tree(root):
    """A tree exercising ripgrep's selection rules."""
    def put(rel, data):
        full = os.path.join(root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(data if isinstance(data, bytes) else data.encode())

    os.makedirs(os.path.join(root, ".git"))
    put(".git/config", "foo = 1\n")
    put(".gitignore", "*.log\nbuild/\n!keep.log\n/top-only.txt\ndocs/**/*.tmp\n")
    put(".ignore", "secret*\n")
    put(".hidden.txt", "foo hidden\n")
    put(".hdir/inner.py", "foo inner\n")
    put("README.md", "# Foo project\nfoo bar\n")
    put("a.txt", "alpha foo\n")
    put("a-b.txt", "a.b literal\naxb regex\n")
    put("a/x.py", "def foo():\n    return 1\n")
    put("B.md", "FOO upper\n")
    put("build/out.txt", "foo build\n")
    put("keep.log", "foo keep\n")
    put("debug.log", "foo debug\n")
    put("top-only.txt", "foo top\n")
    put("sub/top-only.txt", "foo sub top\n")
    put("docs/guide/x.tmp", "foo tmp\n")
    put("docs/guide/y.md", "foo guide\n")
    put("secret.env", "foo secret\n")
    put("sub/.gitignore", "!debug.log\n*.md\n[broken\n")  # in-tree: a warning only
    put("sub/debug.log", "foo sub debug\n")
    put("sub/notes.md", "foo notes\n")
    put("sub/code.py", 'x = "foo"\n')
    os.makedirs(os.path.join(root, "nested/.git"))
    put("nested/x.log", "foo nested log\n")
    put("bin.dat", b"foo\x00binary\n")
    put("utf16.txt", "foo in utf16\nsecond\n".encode("utf-16"))
    put("bom.txt", b"\xef\xbb\xbffoo with bom\n")
    put("crlf.txt", "foo crlf\r\nbar\r\nfoo$\r\n")
    put("long.txt", "x" * 2500 + " foo\nshort foo\n" + "y" * 1996 + "foo\n")
    put("nonl.txt", "last foo")
    put("caf\u00e9.txt", "foo accent\n")
    put("z/deep/er/file.py", "foo deep\n")
    os.symlink("a/x.py", os.path.join(root, "link.py"))
    os.mkfifo(os.path.join(root, "pipe"))
    with open(os.path.join(os.fsencode(root), b"raw\xffname.txt"), "wb") as handle:
        handle.write(b"foo raw\n")
    for i in range(30):
        put("many/f%02d.txt" % i, "needle %d\n" % i)
    # matches long before a NUL byte: rg prints some, then reports the file as binary
    put("lb/late-binary.txt", "".join("foo line %d\n" % i for i in range(20000)) + "\x00tail\n")
    put("lb/plain.txt", "foo line plain\n")


GLOB_CASES = [
    {"pattern": "*.py"}, {"pattern": "*.py", "hidden": True}, {"pattern": "**/*.md"},
    {"pattern": "a/*"}, {"pattern": "*.{md,txt}"}, {"pattern": "[ab]*"}, {"pattern": "?.txt"},
    {"pattern": "!*.txt"}, {"pattern": "!*.txt", "hidden": True}, {"pattern": "sub/**"},
    {"pattern": "**"}, {"pattern": "*"}, {"pattern": "*", "hidden": True}, {"pattern": "*.log"},
    {"pattern": "nomatch*"}, {"pattern": ".*"}, {"pattern": "caf*"}, {"pattern": "*name*"},
    {"pattern": "/*.md"}, {"pattern": "docs/"}, {"pattern": "z/**/file.py"},
    {"pattern": "*.txt", "path": "many", "limit": 5}, {"pattern": "*.txt", "limit": 2000},
    {"pattern": "*", "path": "z"}, {"pattern": "*.py", "path": "sub"},
]

GREP_CASES = [
    {"pattern": "foo"}, {"pattern": "FOO", "caseSensitive": True}, {"pattern": "a.b", "literal": True},
    {"pattern": "a.b"}, {"pattern": "^foo"}, {"pattern": "foo$"}, {"pattern": "foo", "include": "*.py"},
    {"pattern": "foo", "include": "*.{md,txt}"}, {"pattern": "foo", "path": "crlf.txt"},
    {"pattern": "foo", "path": "bin.dat"}, {"pattern": "foo", "limit": 5},
    {"pattern": "foo", "path": "utf16.txt"}, {"pattern": "foo", "path": "long.txt"},
    {"pattern": "needle", "path": "many", "limit": 7}, {"pattern": "needle 2\\d"},
    {"pattern": "nothing-matches-this"}, {"pattern": "foo", "path": "z"},
    {"pattern": "foo line", "path": "lb", "limit": 2000},
    {"pattern": "foo line", "path": "lb/late-binary.txt"},
]


class SearchTests(GuestCase):
    def setUp(self):
        super().setUp()
        build_search_tree(self.dir)

    def both(self, op, args):
        """The answer of every engine; they must be identical."""
        answers = {engine: self.call(op, args, engine=engine) for engine in ENGINES}
        first = answers["python"]
        for engine, answer in answers.items():
            if "error" in first:
                self.assertEqual(answer.get("error", {}).get("code"), first["error"]["code"],
                                 "%s %r: %s" % (op, args, answers))
            else:
                self.assertEqual(answer, first, "%s %r: engines differ" % (op, args))
        self.assertIn("result", first, "%s %r failed: %r" % (op, args, first))
        return first["result"]

    def test_engines_agree_on_glob(self):
        for args in GLOB_CASES:
            with self.subTest(args=args):
                self.both("glob", args)

    def test_engines_agree_on_grep(self):
        for args in GREP_CASES:
            with self.subTest(args=args):
                self.both("grep", args)

    def test_glob_respects_ignore_files_and_hidden(self):
        files = self.both("glob", {"pattern": "**/*.txt", "limit": 2000})["files"]
        self.assertIn("a.txt", files)
        self.assertIn("sub/top-only.txt", files)
        self.assertIn("caf\u00e9.txt", files)
        self.assertIn("top-only.txt", files)  # a --glob match overrides ignore rules ...
        self.assertNotIn("build/out.txt", files)  # ... but ignored dirs are not entered
        files = self.both("glob", {"pattern": "*.py"})["files"]
        self.assertEqual(files, ["a/x.py", "sub/code.py", "z/deep/er/file.py"])
        files = self.both("glob", {"pattern": "*.py", "hidden": True})["files"]
        self.assertEqual(files, [".hdir/inner.py", "a/x.py", "sub/code.py", "z/deep/er/file.py"])
        files = self.both("glob", {"pattern": "!*.txt"})["files"]
        self.assertNotIn("debug.log", files)  # .gitignore
        self.assertNotIn("secret.env", files)  # .ignore
        self.assertIn("keep.log", files)  # re-included by !keep.log
        self.assertIn("sub/debug.log", files)  # deeper .gitignore wins
        self.assertNotIn("sub/notes.md", files)
        self.assertIn("nested/x.log", files)  # nested repository: outer .gitignore stops
        self.assertNotIn("link.py", files)  # symlinks are not listed
        self.assertFalse(any(f.startswith((".git/", "build/", ".hdir/")) for f in files))

    def test_glob_paths_relative_to_cwd_sorted_and_limited(self):
        result = self.both("glob", {"pattern": "*.txt", "path": "many", "limit": 5})
        self.assertEqual(result["files"], ["many/f%02d.txt" % i for i in range(5)])
        self.assertTrue(result["truncated"])
        self.assertIn("truncated", result["text"])
        result = self.both("glob", {"pattern": "nomatch*"})
        self.assertEqual((result["files"], result["text"]), ([], "No matches found"))

    def test_glob_limits_validated(self):
        self.err("glob", {"pattern": "*", "limit": 2001}, "bad_args")
        self.err("glob", {"pattern": ""}, "bad_args")
        self.err("glob", {"pattern": "*", "path": "a.txt"}, "not_a_directory")

    def test_grep_output_format_and_order(self):
        result = self.both("grep", {"pattern": "foo", "include": "*.py"})
        self.assertEqual(result["text"], 'a/x.py:1:def foo():\nsub/code.py:1:x = "foo"\n'
                                         "z/deep/er/file.py:1:foo deep")
        self.assertEqual(result["matches"][0], {"path": "a/x.py", "line": 1, "text": "def foo():"})

    def test_grep_case_literal_binary_and_long_lines(self):
        texts = [m["text"] for m in self.both("grep", {"pattern": "FOO"})["matches"]]
        self.assertIn("FOO upper", texts)
        self.assertIn("foo with bom", texts)  # UTF-8 BOM stripped
        self.assertNotIn("foo\x00binary", texts)  # binary files skipped
        only = self.both("grep", {"pattern": "FOO", "caseSensitive": True})["text"]
        self.assertEqual(only, "B.md:1:FOO upper")
        literal = self.both("grep", {"pattern": "a.b", "literal": True})["matches"]
        self.assertEqual([m["text"] for m in literal], ["a.b literal"])
        long_lines = self.both("grep", {"pattern": "foo", "path": "long.txt"})["matches"]
        self.assertEqual([m["text"] for m in long_lines],
                         ["[Omitted long matching line]", "short foo", "y" * 1996 + "foo"])
        self.assertEqual(self.both("grep", {"pattern": "foo", "path": "crlf.txt"})["text"],
                         "crlf.txt:1:foo crlf\ncrlf.txt:3:foo$")

    def test_binary_detected_after_many_matches(self):
        result = self.both("grep", {"pattern": "foo line", "path": "lb", "limit": 2000})
        self.assertEqual(result["text"], "lb/plain.txt:1:foo line plain")

    def test_git_dir_never_listed(self):
        files = self.both("glob", {"pattern": "*", "hidden": True, "limit": 2000})["files"]
        self.assertIn(".hidden.txt", files)
        self.assertFalse(any(f.startswith(".git/") for f in files))

    def test_gitignore_needs_a_repository_but_ignore_does_not(self):
        plain = self.path("plain")
        os.makedirs(plain)
        for name, data in ((".gitignore", "*.log\n"), (".ignore", "*.tmp\n"),
                           ("a.log", "x\n"), ("b.tmp", "x\n"), ("c.txt", "x\n")):
            with open(os.path.join(plain, name), "w") as handle:
                handle.write(data)
        shutil.rmtree(self.path(".git"))
        shutil.rmtree(self.path("nested/.git"))
        result = self.both("glob", {"pattern": "!nothing", "path": "plain"})
        self.assertEqual(result["files"], ["plain/a.log", "plain/c.txt"])

    def test_grep_limit_and_no_matches(self):
        result = self.both("grep", {"pattern": "needle", "path": "many", "limit": 7})
        self.assertEqual(len(result["matches"]), 7)
        self.assertTrue(result["truncated"])
        self.assertEqual(result["matches"][-1]["path"], "many/f06.txt")
        self.assertEqual(self.both("grep", {"pattern": "zzz-none"})["text"], "No matches found")

    def test_grep_errors(self):
        for engine in ENGINES:
            self.err("grep", {"pattern": "(unclosed"}, "search_failed", engine=engine)
            self.err("grep", {"pattern": "x", "path": "missing"}, "no_such_file", engine=engine)
            self.err("glob", {"pattern": "{a,{b}}"}, "search_failed", engine=engine)
        self.err("grep", {"pattern": "a\nb"}, "bad_args")
        self.err("grep", {"pattern": "x", "limit": 0}, "bad_args")

    def test_broken_ignore_file_above_root_fails_like_rg(self):
        self.assertEqual(self.both("grep", {"pattern": "foo", "path": "sub"})["text"],
                         "sub/code.py:1:x = \"foo\"\nsub/debug.log:1:foo sub debug\n"
                         "sub/top-only.txt:1:foo sub top")
        with open(self.path(".gitignore"), "a") as handle:
            handle.write("[broken\n")
        for engine in ENGINES:
            self.err("grep", {"pattern": "foo", "path": "sub"}, "search_failed", engine=engine)
            self.err("glob", {"pattern": "*", "path": "z"}, "search_failed", engine=engine)
            self.ok("grep", {"pattern": "foo"}, engine=engine)  # in-tree: warnings only


# ---------------------------------------------------------------------------
# stat, list, mkdir, remove, move
# ---------------------------------------------------------------------------


class FileSystemTests(GuestCase):
    def test_stat_file_dir_and_symlink(self):
        self.put("f.txt", "12345", mode=0o640)
        os.symlink("f.txt", self.path("l"))
        result = self.ok("stat", {"path": "f.txt"})
        self.assertEqual((result["type"], result["size"], result["mode"]), ("file", 5, "0640"))
        self.assertIsInstance(result["mtime"], float)
        self.assertEqual(self.ok("stat", {"path": "."})["type"], "directory")
        link = self.ok("stat", {"path": "l"})
        self.assertEqual((link["type"], link["target"]), ("symlink", "f.txt"))
        self.err("stat", {"path": "missing"}, "no_such_file")

    def test_list_flat_recursive_and_limit(self):
        self.put("d/b.txt", "bb")
        self.put("d/a/c.txt", "c")
        os.symlink("b.txt", self.path("d/link"))
        flat = self.ok("list", {"path": "d"})["entries"]
        self.assertEqual([(e["name"], e["type"]) for e in flat],
                         [("a", "directory"), ("b.txt", "file"), ("link", "symlink")])
        self.assertEqual(flat[1]["size"], 2)
        deep = self.ok("list", {"path": "d", "recursive": True})["entries"]
        self.assertEqual([e["name"] for e in deep], ["a", "a/c.txt", "b.txt", "link"])
        limited = self.ok("list", {"path": "d", "recursive": True, "limit": 2})
        self.assertEqual((len(limited["entries"]), limited["truncated"]), (2, True))
        self.err("list", {"path": "d/b.txt"}, "not_a_directory")

    def test_mkdir(self):
        self.assertTrue(self.ok("mkdir", {"path": "x/y/z"})["created"])
        self.assertTrue(os.path.isdir(self.path("x/y/z")))
        self.assertFalse(self.ok("mkdir", {"path": "x/y/z"})["created"])
        self.err("mkdir", {"path": "p/q", "parents": False}, "no_such_file")
        self.put("file", "")
        self.err("mkdir", {"path": "file"}, "exists")

    def test_remove(self):
        self.put("d/inner/f.txt", "x")
        self.put("single.txt", "x")
        self.ok("remove", {"path": "single.txt"})
        self.assertFalse(os.path.exists(self.path("single.txt")))
        self.err("remove", {"path": "d"}, "not_empty")
        self.assertTrue(os.path.exists(self.path("d/inner/f.txt")))
        self.assertEqual(self.ok("remove", {"path": "d", "recursive": True})["type"], "directory")
        self.assertFalse(os.path.exists(self.path("d")))
        self.err("remove", {"path": "missing"}, "no_such_file")

    def test_remove_refuses_root_and_cwd(self):
        self.put("work/f.txt", "x")
        work = self.path("work")
        self.err("remove", {"path": "/", "recursive": True}, "refused", cwd=work)
        self.err("remove", {"path": ".", "recursive": True}, "refused", cwd=work)
        self.err("remove", {"path": "..", "recursive": True}, "refused", cwd=work)
        self.assertTrue(os.path.exists(self.path("work/f.txt")))

    def test_remove_symlink_not_target(self):
        self.put("d/keep.txt", "x")
        os.symlink("d", self.path("dl"))
        self.assertEqual(self.ok("remove", {"path": "dl"})["type"], "symlink")
        self.assertTrue(os.path.exists(self.path("d/keep.txt")))

    def test_move(self):
        self.put("a.txt", "A")
        result = self.ok("move", {"from": "a.txt", "to": "sub/dir/b.txt"})
        self.assertEqual(result, {"from": self.path("a.txt"), "to": self.path("sub/dir/b.txt")})
        self.assertEqual(self.get("sub/dir/b.txt"), b"A")
        self.assertFalse(os.path.exists(self.path("a.txt")))

    def test_move_onto_existing_refused_unless_overwrite(self):
        self.put("src.txt", "new")
        self.put("dst.txt", "old")
        self.err("move", {"from": "src.txt", "to": "dst.txt"}, "exists")
        self.assertEqual((self.get("src.txt"), self.get("dst.txt")), (b"new", b"old"))
        self.ok("move", {"from": "src.txt", "to": "dst.txt", "overwrite": True})
        self.assertEqual(self.get("dst.txt"), b"new")
        self.assertFalse(os.path.exists(self.path("src.txt")))

    def test_move_across_filesystems(self):
        # /dev/shm is usually a separate tmpfs, which makes rename(2) fail with EXDEV
        other = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.addCleanup(shutil.rmtree, other, True)
        self.put("tree/sub/f.txt", "hi\n")
        os.symlink("f.txt", self.path("tree/sub/link"))
        self.put("tool", "#!/bin/sh\n", mode=0o755)
        self.ok("move", {"from": "tree", "to": os.path.join(other, "tree")})
        self.ok("move", {"from": "tool", "to": os.path.join(other, "tool")})
        self.assertFalse(os.path.exists(self.path("tree")) or os.path.exists(self.path("tool")))
        with open(os.path.join(other, "tree/sub/f.txt"), "rb") as handle:
            self.assertEqual(handle.read(), b"hi\n")
        self.assertEqual(os.readlink(os.path.join(other, "tree/sub/link")), "f.txt")
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(other, "tool")).st_mode), 0o755)
        self.assertEqual(self.temp_leftovers(other), [])

    def test_move_directory_into_itself_refused(self):
        self.put("d/f", "x")
        self.err("move", {"from": "d", "to": "d/inner"}, "bad_args")
        self.err("move", {"from": "missing", "to": "x"}, "no_such_file")


# ---------------------------------------------------------------------------
# manifest
# ---------------------------------------------------------------------------


class ManifestTests(GuestCase):
    def test_files_and_symlinks_sorted_with_hashes(self):
        self.put("b.txt", "bee")
        self.put("a/z.txt", "zed", mode=0o600)
        self.put("a.txt", "ay")
        os.symlink("b.txt", self.path("link"))
        os.makedirs(self.path("empty"))
        os.mkfifo(self.path("pipe"))
        result = self.ok("manifest", {"sha256": True})
        entries = result["entries"]
        self.assertEqual([e["path"] for e in entries], ["a.txt", "a/z.txt", "b.txt", "link"])
        by_path = {e["path"]: e for e in entries}
        self.assertEqual(by_path["b.txt"]["sha256"], hashlib.sha256(b"bee").hexdigest())
        self.assertEqual(by_path["a/z.txt"]["mode"], "0600")
        self.assertEqual(by_path["a/z.txt"]["size"], 3)
        self.assertEqual((by_path["link"]["type"], by_path["link"]["target"]), ("symlink", "b.txt"))
        self.assertNotIn("sha256", by_path["link"])
        st = os.stat(self.path("b.txt"))
        self.assertEqual(by_path["b.txt"]["mtime_ns"], st.st_mtime_ns)
        self.assertAlmostEqual(by_path["b.txt"]["mtime"], st.st_mtime, places=3)
        self.assertNotIn("sha256", self.ok("manifest", {})["entries"][0])

    def test_excludes_and_symlinked_dirs_not_followed(self):
        self.put("src/main.py", "x")
        self.put("node_modules/pkg/index.js", "x")
        self.put("src/node_modules/deep.js", "x")
        self.put("keys/server.pem", "x")
        self.put(".env.local", "x")
        os.symlink(self.path("src"), self.path("srclink"))
        entries = self.ok("manifest", {"excludes": ["node_modules", "*.pem", ".env.*"]})["entries"]
        self.assertEqual([e["path"] for e in entries], ["src/main.py", "srclink"])
        self.err("manifest", {"excludes": ["[oops"]}, "bad_args")

    def test_non_utf8_names_get_base64(self):
        raw = b"caf\xe9.txt"
        with open(os.path.join(os.fsencode(self.dir), raw), "wb") as handle:
            handle.write(b"x")
        entry = self.ok("manifest", {})["entries"][0]
        self.assertEqual(base64.b64decode(entry["path_b64"]), raw)
        self.assertEqual(entry["path"], "caf\ufffd.txt")

    def test_path_argument_and_errors(self):
        self.put("proj/f.txt", "x")
        result = self.ok("manifest", {"path": "proj"})
        self.assertEqual((result["root"], [e["path"] for e in result["entries"]]),
                         (self.path("proj"), ["f.txt"]))
        self.err("manifest", {"path": "proj/f.txt"}, "not_a_directory")
        self.err("manifest", {"path": "nowhere"}, "no_such_file")


class ServeCase(unittest.TestCase):
    """Resident mode: JSON lines over one long-lived helper process."""

    def setUp(self):
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix="cos-guest-serve-"))
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.marker = "sleep %d.%03d" % (300 + os.getpid() % 50, threading.get_ident() % 1000)

    def start(self, env=None):
        proc = subprocess.Popen([sys.executable, HELPER, "serve"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env or engine_env("python"))
        self.addCleanup(self.stop, proc)
        ready = self.recv(proc)
        self.assertEqual(ready["ready"]["pid"], proc.pid)
        return proc

    def stop(self, proc):
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for handle in (proc.stdin, proc.stdout):
            if not handle.closed:
                handle.close()
        for pid in self.running():  # what a test left behind on purpose
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass

    def send(self, proc, rid, op, args=None, cwd=None):
        line = {"v": 1, "id": rid, "op": op, "cwd": cwd or self.dir, "args": args or {}}
        proc.stdin.write((json.dumps(line) + "\n").encode())
        proc.stdin.flush()

    def recv(self, proc):
        line = proc.stdout.readline()
        self.assertTrue(line, "the helper ended early")
        message = json.loads(line)
        self.assertEqual(message.get("v"), 1, message)
        return message

    def until_answer(self, proc, rid):
        """(output chunks by stream, final answer) of request `rid`."""
        chunks = {"stdout": b"", "stderr": b""}
        while True:
            message = self.recv(proc)
            if message.get("id") != rid:
                continue
            if "data" in message:
                chunks[message["stream"]] += base64.b64decode(message["data"])
                continue
            return chunks, message

    def running(self):
        out = subprocess.run(["pgrep", "-f", self.marker], capture_output=True, text=True)
        return [line for line in out.stdout.split() if line]

    def test_file_operations_and_commands_share_one_process(self):
        proc = self.start()
        self.send(proc, 1, "write", {"path": "a.txt", "content": "hello\n"})
        self.assertEqual(self.until_answer(proc, 1)[1]["result"]["bytes"], 6)
        self.send(proc, 2, "exec", {"argv": ["sh", "-c", "cat a.txt; echo err >&2; pwd; exit 3"]})
        chunks, answer = self.until_answer(proc, 2)
        self.assertEqual(chunks, {"stdout": ("hello\n%s\n" % self.dir).encode(), "stderr": b"err\n"})
        result = answer["result"]
        self.assertEqual((result["exit_code"], result["signal"], result["truncated"]), (3, None, False))
        self.assertEqual(result["bytes"], {"stdout": 7 + len(self.dir), "stderr": 4})
        self.send(proc, 3, "read", {"path": "a.txt"})
        self.assertEqual(self.until_answer(proc, 3)[1]["result"]["content"], "1: hello")

    def test_bad_lines_get_errors_and_the_helper_keeps_serving(self):
        proc = self.start()
        proc.stdin.write(b"not json\n{\"v\": 1, \"op\": \"read\"}\n")
        proc.stdin.flush()
        first, second = self.recv(proc), self.recv(proc)
        self.assertEqual((first["id"], first["error"]["code"]), (None, "bad_request"))
        self.assertEqual((second["id"], second["error"]["code"]), (None, "bad_request"))
        self.send(proc, 4, "nope")
        self.assertEqual(self.until_answer(proc, 4)[1]["error"]["code"], "unknown_op")
        self.send(proc, 5, "exec", {"argv": []})
        self.assertEqual(self.until_answer(proc, 5)[1]["error"]["code"], "bad_args")
        self.send(proc, 6, "exec", {"argv": ["true"], "cwd": "missing"})
        self.assertEqual(self.until_answer(proc, 6)[1]["error"]["code"], "no_such_file")
        self.send(proc, 7, "ping")
        self.assertEqual(self.until_answer(proc, 7)[1]["result"]["runs"], 0)

    def test_output_beyond_the_bound_is_counted_not_sent(self):
        proc = self.start()
        self.send(proc, 1, "exec", {"argv": ["sh", "-c", "head -c 5000 /dev/zero"], "max_bytes": 1000})
        chunks, answer = self.until_answer(proc, 1)
        self.assertEqual(len(chunks["stdout"]), 1000)
        self.assertTrue(answer["result"]["truncated"])
        self.assertEqual(answer["result"]["bytes"]["stdout"], 5000)

    def test_a_run_ends_with_its_leader_and_leaves_background_children(self):
        proc = self.start()
        self.send(proc, 1, "exec", {"argv": ["sh", "-c", "%s >/dev/null 2>&1 & echo left" % self.marker]})
        chunks, answer = self.until_answer(proc, 1)
        self.assertEqual((chunks["stdout"], answer["result"]["exit_code"]), (b"left\n", 0))
        self.assertEqual(len(self.running()), 1)

    def test_cancel_stops_the_whole_tree(self):
        proc = self.start()
        # A child in a session of its own still carries the run's tag.
        script = "setsid %s & %s & %s; wait" % (self.marker, self.marker, self.marker)
        self.send(proc, 1, "exec", {"argv": ["sh", "-c", script]})
        for _ in range(200):
            if len(self.running()) >= 3:
                break
            threading.Event().wait(0.02)
        self.assertGreaterEqual(len(self.running()), 3)
        self.send(proc, 2, "cancel", {"target": 1, "grace_ms": 200})
        self.assertTrue(self.until_answer(proc, 2)[1]["result"]["found"])
        answer = self.until_answer(proc, 1)[1]["result"]
        self.assertTrue(answer["cancelled"])
        self.assertIsNone(answer["exit_code"])
        self.assertIn(answer["signal"], ("SIGTERM", "SIGKILL"))
        self.assertEqual(self.running(), [])
        self.send(proc, 3, "cancel", {"target": 1})
        self.assertFalse(self.until_answer(proc, 3)[1]["result"]["found"])

    def test_end_of_stdin_stops_runs_and_ends_the_helper(self):
        proc = self.start()
        self.send(proc, 1, "exec", {"argv": ["sh", "-c", self.marker]})
        for _ in range(200):
            if self.running():
                break
            threading.Event().wait(0.02)
        proc.stdin.close()
        answer = self.until_answer(proc, 1)[1]["result"]
        self.assertTrue(answer["cancelled"])
        self.assertEqual(self.recv(proc)["bye"], "stdin closed")
        self.assertEqual(proc.wait(timeout=30), 0)
        self.assertEqual(self.running(), [])

    def test_an_idle_helper_ends_itself(self):
        env = engine_env("python")
        env["COS_GUEST_IDLE_EXIT"] = "0.3"
        proc = self.start(env)
        self.assertEqual(self.recv(proc)["bye"], "idle")
        self.assertEqual(proc.wait(timeout=30), 0)

    def test_once_mode_takes_the_request_from_argv(self):
        request = {"v": 1, "op": "stat", "cwd": self.dir, "args": {"path": "."}}
        encoded = base64.b64encode(json.dumps(request).encode()).decode()
        out = subprocess.run([sys.executable, HELPER, "once", encoded], capture_output=True,
                             stdin=subprocess.DEVNULL, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout)["result"]["type"], "directory")
        out = subprocess.run([sys.executable, HELPER, "once", "%%%"], capture_output=True, timeout=60)
        self.assertEqual(json.loads(out.stdout)["error"]["code"], "bad_request")
        out = subprocess.run([sys.executable, HELPER, "bogus"], capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
