#!/usr/bin/env python3
"""cos_guest: file operations performed inside a CreateOS sandbox.

The client (createos-sandbox, `src/guest.rs`) uploads this one file and runs
`python3 cos_guest.py < request.json`.  Protocol (version 1):

    request : {"v": 1, "op": "<name>", "cwd": "<absolute dir>", "args": {...}}
    answer  : {"v": 1, "result": ...}
           or {"v": 1, "error": {"code": "<stable_snake_code>", "message": "...",
                                  "details": {...}}}        # details optional

Exactly one JSON answer is written to stdout and the exit status is 0 whenever
an answer was written.  Relative paths resolve against `cwd`; `..` is resolved
lexically and may never climb above `/`.  No shell is ever used.

Requirements: Python >= 3.9, standard library only.  `rg` (ripgrep) is used
for `glob`/`grep` when it is on PATH (set COS_GUEST_NO_RG=1 to force the
pure-Python engine); the Python engine reproduces ripgrep's file selection
(.gitignore/.ignore/.rgignore, hidden files, --glob overrides, binary files)
so both engines give the same answers.

Error codes: bad_request, unsupported_version, unknown_op, bad_args, bad_path,
no_such_file, not_a_file, not_a_directory, is_directory, exists, not_empty,
permission_denied, too_large, binary_file, out_of_range, not_found, ambiguous,
patch_invalid, patch_failed, refused, search_failed, io_error, internal.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import platform
import queue
import re
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

PROTOCOL_VERSION = 1
MAX_TEXT_BYTES = 1024 * 1024  # text reads/edits/patches: 1 MiB per file
MAX_READ_LINES = 2000
MAX_DIR_ENTRIES = 2000
SEARCH_DEFAULT_LIMIT = 100
SEARCH_MAX_LIMIT = 2000
MAX_COLUMNS = 2000  # grep: longer lines are replaced by OMITTED_LINE (as rg -M)
OMITTED_LINE = "[Omitted long matching line]"
NO_MATCHES = "No matches found"
LIST_DEFAULT_LIMIT = 1000
LIST_MAX_LIMIT = 10000
READ_CHUNK = 64 * 1024
TEMP_PREFIX = ".cos-"
NEW_FILE_MODE = 0o644
NO_RG_ENV = "COS_GUEST_NO_RG"


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class GuestError(Exception):
    """An error answer: a stable code plus a message that says what to do."""

    def __init__(self, code, message, details=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def to_json(self):
        body = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


_ERRNO_CODES = {
    errno.ENOENT: "no_such_file",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.EROFS: "permission_denied",
    errno.EEXIST: "exists",
    errno.ENOTDIR: "not_a_directory",
    errno.EISDIR: "is_directory",
    errno.ENOTEMPTY: "not_empty",
    errno.ELOOP: "bad_path",
    errno.ENAMETOOLONG: "bad_path",
}


def os_error(exc, path, action):
    """Translate an OSError into a GuestError naming the path and the action."""
    code = _ERRNO_CODES.get(exc.errno, "io_error")
    reason = exc.strerror or str(exc)
    return GuestError(code, "cannot %s %s: %s" % (action, path, reason))


def bad_args(op, message):
    return GuestError("bad_args", "%s: %s" % (op, message))


# --------------------------------------------------------------------------
# JSON output (every string must be valid UTF-8 for the Rust side)
# --------------------------------------------------------------------------


def clean_text(value):
    """Replace lone surrogates (from surrogateescape) with U+FFFD."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        raw = value.encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", "replace")


def sanitize(obj):
    if isinstance(obj, str):
        return clean_text(obj)
    if isinstance(obj, dict):
        return {clean_text(k): sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [sanitize(v) for v in obj]
    return obj


def bytes_to_text(raw):
    """Display form of raw bytes (paths, lines): invalid UTF-8 becomes U+FFFD."""
    return raw.decode("utf-8", "replace")


def path_fields(raw, key="path"):
    """{key: text} for a raw byte path, plus key_b64 when it is not UTF-8."""
    try:
        return {key: raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            key: bytes_to_text(raw),
            key + "_b64": base64.b64encode(raw).decode("ascii"),
        }


# --------------------------------------------------------------------------
# Argument validation: every key is checked, unknown keys are refused
# --------------------------------------------------------------------------


class Arg:
    """One accepted argument: kind is str, bool, int or str_list."""

    def __init__(self, kind, required=False, default=None, minimum=None,
                 maximum=None, allow_empty=True):
        self.kind = kind
        self.required = required
        self.default = default
        self.minimum = minimum
        self.maximum = maximum
        self.allow_empty = allow_empty

    def check(self, op, name, value):
        checker = getattr(self, "_check_" + self.kind)
        return checker(op, name, value)

    def _check_str(self, op, name, value):
        if not isinstance(value, str):
            raise bad_args(op, "%r must be a string" % name)
        if not self.allow_empty and value == "":
            raise bad_args(op, "%r must not be empty" % name)
        return value

    def _check_bool(self, op, name, value):
        if not isinstance(value, bool):
            raise bad_args(op, "%r must be true or false" % name)
        return value

    def _check_int(self, op, name, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad_args(op, "%r must be an integer" % name)
        if self.minimum is not None and value < self.minimum:
            raise bad_args(op, "%r must be at least %d" % (name, self.minimum))
        if self.maximum is not None and value > self.maximum:
            raise bad_args(op, "%r must be at most %d" % (name, self.maximum))
        return value

    def _check_str_list(self, op, name, value):
        if not isinstance(value, list):
            raise bad_args(op, "%r must be a list of strings" % name)
        for item in value:
            if not isinstance(item, str) or item == "":
                raise bad_args(op, "%r must hold non-empty strings" % name)
        return list(value)


def take_args(op, args, spec):
    """Validate `args` against `spec`; null means "use the default"."""
    unknown = sorted(set(args) - set(spec))
    if unknown:
        raise bad_args(op, "unknown argument(s) %s; accepted: %s"
                       % (", ".join(unknown), ", ".join(sorted(spec))))
    values = {}
    for name, arg in spec.items():
        value = args.get(name)
        if value is None:
            if arg.required:
                raise bad_args(op, "missing required argument %r" % name)
            values[name] = arg.default
        else:
            values[name] = arg.check(op, name, value)
    return values


def path_arg(required=True):
    return Arg("str", required=required, allow_empty=False)


def limit_arg(default, maximum):
    return Arg("int", default=default, minimum=1, maximum=maximum)


# --------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------


def normalize_path(raw, base, what="path"):
    """Join `raw` onto `base` and resolve `.`/`..` lexically; never above /."""
    if "\x00" in raw:
        raise GuestError("bad_path", "%s contains a NUL byte" % what)
    joined = raw if raw.startswith("/") else base + "/" + raw
    parts = []
    for comp in joined.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if not parts:
                raise GuestError("bad_path", "%s %r escapes /" % (what, raw))
            parts.pop()
        else:
            parts.append(comp)
    return "/" + "/".join(parts)


def is_same_or_inside(path, ancestor):
    if ancestor == "/":
        return True
    return path == ancestor or path.startswith(ancestor + "/")


def display_prefix(cwd, root):
    """Prefix that turns a path relative to `root` into one relative to cwd."""
    if root == cwd:
        return ""
    if is_same_or_inside(root, cwd):
        inner = root[len(cwd):].lstrip("/")
        return inner + "/"
    return root.rstrip("/") + "/"


def lstat_or_none(path):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise os_error(exc, path, "stat")


def stat_existing(path, follow=True):
    try:
        return os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        raise os_error(exc, path, "stat")


def file_type_name(mode):
    kinds = (
        (stat.S_ISREG, "file"), (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char_device"),
        (stat.S_ISBLK, "block_device"),
    )
    for test, name in kinds:
        if test(mode):
            return name
    return "unknown"


def octal_mode(mode):
    return "%04o" % stat.S_IMODE(mode)


def check_parent_chain(path):
    """Refuse early when an existing ancestor of `path` is not a directory."""
    parent = os.path.dirname(path)
    while parent != "/":
        st = lstat_or_none(parent)
        if st is not None:
            target = stat_existing(parent) if stat.S_ISLNK(st.st_mode) else st
            if not stat.S_ISDIR(target.st_mode):
                raise GuestError("not_a_directory",
                                 "%s is not a directory" % parent)
            return
        parent = os.path.dirname(parent)


def make_parents(path):
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
    except FileExistsError:
        raise GuestError("not_a_directory", "%s is not a directory" % parent)
    except OSError as exc:
        raise os_error(exc, parent, "create directory")


# --------------------------------------------------------------------------
# Text files: bounded non-blocking reads, atomic writes
# --------------------------------------------------------------------------


def open_for_read(path):
    """Open without blocking (a FIFO must not hang us) and without a tty."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags)
    except OSError as exc:
        raise os_error(exc, path, "open")


def read_regular_bytes(path, max_bytes):
    """Bytes of a regular file of at most `max_bytes` bytes."""
    fd = open_for_read(path)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise GuestError("is_directory", "%s is a directory" % path)
        if not stat.S_ISREG(st.st_mode):
            raise GuestError("not_a_file", "%s is not a regular file (%s)"
                             % (path, file_type_name(st.st_mode)))
        if st.st_size > max_bytes:
            raise too_large(path, st.st_size)
        data = read_at_most(fd, max_bytes + 1)
    except OSError as exc:
        raise os_error(exc, path, "read")
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise too_large(path, len(data))
    return data


def read_at_most(fd, count):
    chunks = []
    remaining = count
    while remaining > 0:
        chunk = os.read(fd, min(remaining, READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def too_large(path, size):
    return GuestError(
        "too_large",
        "%s is %d bytes; text operations are limited to %d bytes (1 MiB): "
        "use a file transfer (download/upload) instead" % (path, size, MAX_TEXT_BYTES))


def decode_text(path, data):
    if b"\x00" in data:
        raise binary_file(path, "it contains NUL bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise binary_file(path, "it is not valid UTF-8 (byte offset %d)" % exc.start)


def binary_file(path, why):
    return GuestError(
        "binary_file",
        "%s is not a UTF-8 text file (%s); use a file transfer "
        "(download/upload) for binary files" % (path, why))


def read_text_file(path):
    return decode_text(path, read_regular_bytes(path, MAX_TEXT_BYTES))


def write_target(path):
    """Writing through a symlink replaces its target, never the link."""
    st = lstat_or_none(path)
    if st is not None and stat.S_ISLNK(st.st_mode):
        return os.path.realpath(path)
    return path


def create_temp_sibling(directory):
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
             | getattr(os, "O_CLOEXEC", 0))
    for _ in range(100):
        name = os.path.join(directory, TEMP_PREFIX + secrets.token_hex(8))
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
        except OSError as exc:
            raise os_error(exc, directory, "create a temporary file in")
    raise GuestError("io_error", "cannot create a temporary file in %s" % directory)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse directory fsync; the rename is done
    finally:
        os.close(fd)


def keep_owner(fd, st):
    if st is None:
        return
    try:
        os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        pass  # not permitted for an unprivileged user: keep our own ids


def atomic_write(path, data, mode=None):
    """Replace `path` with `data` via a fsynced sibling temp file + rename.

    Keeps the existing file's mode (and owner when allowed); new files get
    `mode` or 0644.  Returns True when the file was created.
    """
    target = write_target(path)
    existing = lstat_or_none(target)
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise GuestError("is_directory", "%s is a directory" % target)
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise GuestError("not_a_file", "%s is not a regular file" % target)
    make_parents(target)
    if existing is not None:
        perm = stat.S_IMODE(existing.st_mode)
    else:
        perm = NEW_FILE_MODE if mode is None else mode
    fd, temp = create_temp_sibling(os.path.dirname(target))
    try:
        write_all(fd, data)
        os.fchmod(fd, perm)
        keep_owner(fd, existing)
        os.fsync(fd)
        os.close(fd)
        fd = None
        os.rename(temp, target)
    except OSError as exc:
        discard_temp(fd, temp)
        raise os_error(exc, target, "write")
    except BaseException:
        discard_temp(fd, temp)
        raise
    fsync_directory(os.path.dirname(target))
    return existing is None


def discard_temp(fd, temp):
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        os.unlink(temp)
    except OSError:
        pass


def encode_content(op, name, text):
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise bad_args(op, "%r is not valid Unicode text (lone surrogate)" % name)


def split_display_lines(text):
    """Lines of `text` without terminators; a final newline adds no line."""
    if text == "":
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


# --------------------------------------------------------------------------
# Operation: read
# --------------------------------------------------------------------------


def op_read(req):
    a = take_args("read", req.args, {
        "path": path_arg(),
        "offset": Arg("int", default=1, minimum=1),
        "limit": limit_arg(MAX_READ_LINES, MAX_READ_LINES),
    })
    path = req.resolve(a["path"])
    if stat.S_ISDIR(stat_existing(path).st_mode):
        return read_directory(path)
    text = read_text_file(path)
    return render_file_lines(path, text, a["offset"], a["limit"])


def read_directory(path):
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: os.fsencode(e.name))
    except OSError as exc:
        raise os_error(exc, path, "list")
    shown = [entry_label(e) for e in entries[:MAX_DIR_ENTRIES]]
    return {
        "type": "directory",
        "path": path,
        "entries": shown,
        "total_entries": len(entries),
        "truncated": len(entries) > MAX_DIR_ENTRIES,
        "content": "\n".join(shown),
    }


def entry_label(entry):
    try:
        is_dir = entry.is_dir()
    except OSError:
        is_dir = False
    return entry.name + "/" if is_dir else entry.name


def render_file_lines(path, text, offset, limit):
    lines = split_display_lines(text)
    total = len(lines)
    if offset > max(total, 1):
        raise GuestError("out_of_range", "offset %d is past the end of %s (%d lines)"
                         % (offset, path, total))
    window = lines[offset - 1:offset - 1 + limit]
    rendered = ["%d: %s" % (offset + i, strip_cr(line)) for i, line in enumerate(window)]
    shown_end = offset - 1 + len(window)
    result = {
        "type": "file",
        "path": path,
        "content": "\n".join(rendered),
        "offset": offset,
        "lines": len(window),
        "total_lines": total,
        "truncated": shown_end < total,
    }
    if shown_end < total:
        result["next_offset"] = shown_end + 1
    return result


def strip_cr(line):
    return line[:-1] if line.endswith("\r") else line


# --------------------------------------------------------------------------
# Operation: write
# --------------------------------------------------------------------------


def op_write(req):
    a = take_args("write", req.args, {
        "path": path_arg(),
        "content": Arg("str", required=True),
    })
    path = req.resolve(a["path"])
    data = encode_content("write", "content", a["content"])
    created = atomic_write(path, data)
    return {"path": path, "bytes": len(data), "created": created}


# --------------------------------------------------------------------------
# Operation: edit
# --------------------------------------------------------------------------


def op_edit(req):
    a = take_args("edit", req.args, {
        "path": path_arg(),
        "oldString": Arg("str", required=True),
        "newString": Arg("str", required=True),
        "replaceAll": Arg("bool", default=False),
    })
    old, new = a["oldString"], a["newString"]
    if old == "":
        raise bad_args("edit", "oldString must not be empty (use write to create a file)")
    if old == new:
        raise bad_args("edit", "oldString and newString are identical: nothing to change")
    path = req.resolve(a["path"])
    text = read_text_file(path)
    old_eff, new_eff = match_line_endings(text, old, new)
    count = text.count(old_eff)
    if count == 0:
        raise GuestError("not_found", "oldString was not found in %s; read the file "
                         "and copy the exact text (whitespace matters)" % path)
    if count > 1 and not a["replaceAll"]:
        raise GuestError("ambiguous", "oldString occurs %d times in %s; add surrounding "
                         "context to make it unique or set replaceAll" % (count, path),
                         {"count": count})
    updated = text.replace(old_eff, new_eff) if a["replaceAll"] else text.replace(old_eff, new_eff, 1)
    atomic_write(path, encode_content("edit", "newString", updated))
    return {"path": path, "replacements": count if a["replaceAll"] else 1}


def uses_crlf(text):
    crlf = text.count("\r\n")
    return crlf > 0 and crlf >= text.count("\n") - crlf


def to_lf(text):
    return text.replace("\r\n", "\n")


def to_crlf(text):
    return to_lf(text).replace("\n", "\r\n")


def match_line_endings(text, old, new):
    """Strings to apply to `text`, translated to the file's line endings.

    The new text always takes the file's style; the old text is used as
    given when it occurs, else translated (LF<->CRLF) to the file's style.
    """
    convert = to_crlf if uses_crlf(text) else to_lf
    new_eff = convert(new) if "\n" in new else new
    if old in text:
        return old, new_eff
    translated = convert(old)
    if translated != old and translated in text:
        return translated, new_eff
    return old, new_eff


# --------------------------------------------------------------------------
# Operation: patch — parsing
# --------------------------------------------------------------------------

PATCH_BEGIN = "*** Begin Patch"
PATCH_END = "*** End Patch"
PATCH_ADD = "*** Add File: "
PATCH_DELETE = "*** Delete File: "
PATCH_UPDATE = "*** Update File: "
PATCH_MOVE = "*** Move to: "
PATCH_EOF = "*** End of File"
_UNIFIED_RANGE = re.compile(r"^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@\s*(.*)$")


class Hunk:
    def __init__(self, number, hint):
        self.number = number
        self.hint = hint
        self.lines = []  # (kind, text) with kind in " ", "-", "+"
        self.at_eof = False

    def old_lines(self):
        return [t for k, t in self.lines if k in " -"]

    def label(self):
        hint = " (@@ %s)" % self.hint if self.hint else ""
        return "hunk %d%s" % (self.number, hint)


class FileSection:
    def __init__(self, action, raw_path, line_no):
        self.action = action  # add, delete, update
        self.raw_path = raw_path
        self.line_no = line_no
        self.move_to = None
        self.added = []  # add: content lines
        self.hunks = []


class PatchParser:
    """Parser for the `*** Begin Patch` / `*** End Patch` grammar."""

    def __init__(self, text):
        lines = to_lf(text).split("\n")
        while lines and lines[-1].strip() == "":
            lines.pop()
        start = 0
        while start < len(lines) and lines[start].strip() == "":
            start += 1
        self.lines = lines
        self.pos = start
        self.sections = []

    def fail(self, message, line_no=None):
        where = " (patch line %d)" % line_no if line_no else ""
        return GuestError("patch_invalid", "invalid patch%s: %s" % (where, message))

    def peek(self):
        return self.lines[self.pos] if self.pos < len(self.lines) else None

    def parse(self):
        if self.peek() is None or self.peek().strip() != PATCH_BEGIN:
            raise self.fail("the first line must be %r" % PATCH_BEGIN, self.pos + 1)
        if self.lines[-1].strip() != PATCH_END:
            raise self.fail("the last line must be %r" % PATCH_END, len(self.lines))
        self.pos += 1
        end = len(self.lines) - 1
        while self.pos < end:
            self.parse_section(end)
        if not self.sections:
            raise self.fail("the patch contains no file sections")
        return self.sections

    def parse_section(self, end):
        line = self.lines[self.pos]
        line_no = self.pos + 1
        for prefix, action in ((PATCH_ADD, "add"), (PATCH_DELETE, "delete"),
                               (PATCH_UPDATE, "update")):
            if line.startswith(prefix):
                path = line[len(prefix):].strip()
                if not path:
                    raise self.fail("missing file path", line_no)
                section = FileSection(action, path, line_no)
                self.pos += 1
                getattr(self, "parse_" + action)(section, end)
                self.sections.append(section)
                return
        raise self.fail("expected a file header (*** Add File:, *** Delete File: or "
                        "*** Update File:), found %r" % line, line_no)

    def at_header(self, end):
        return self.pos >= end or is_section_header(self.lines[self.pos])

    def parse_add(self, section, end):
        while not self.at_header(end):
            line = self.lines[self.pos]
            if not line.startswith("+"):
                raise self.fail("every line of an added file must start with '+'",
                                self.pos + 1)
            section.added.append(line[1:])
            self.pos += 1

    def parse_delete(self, section, end):
        if not self.at_header(end):
            raise self.fail("a Delete File section has no body", self.pos + 1)

    def parse_update(self, section, end):
        if not self.at_header(end) and self.lines[self.pos].startswith(PATCH_MOVE):
            target = self.lines[self.pos][len(PATCH_MOVE):].strip()
            if not target:
                raise self.fail("missing Move to path", self.pos + 1)
            section.move_to = target
            self.pos += 1
        while not self.at_header(end):
            section.hunks.append(self.parse_hunk(len(section.hunks) + 1, end))
        if not section.hunks and section.move_to is None:
            raise self.fail("Update File %s has no hunks" % section.raw_path, section.line_no)

    def parse_hunk(self, number, end):
        line = self.lines[self.pos]
        if line.startswith("@@"):
            hunk = Hunk(number, hunk_hint(line[2:]))
            self.pos += 1
        elif number == 1:
            hunk = Hunk(number, "")  # the first hunk may omit its @@ line
        else:
            raise self.fail("expected '@@' to start hunk %d" % number, self.pos + 1)
        while not self.at_header(end):
            line = self.lines[self.pos]
            if line.startswith("@@"):
                break
            if line.strip() == PATCH_EOF:
                hunk.at_eof = True
                self.pos += 1
                break
            hunk.lines.append(self.hunk_line(line))
            self.pos += 1
        if not hunk.lines:
            raise self.fail("hunk %d is empty" % number, self.pos)
        return hunk

    def hunk_line(self, line):
        if line == "":
            return (" ", "")  # a blank context line whose space was stripped
        if line[0] in " -+":
            return (line[0], line[1:])
        raise self.fail("hunk lines must start with ' ', '-' or '+', found %r" % line,
                        self.pos + 1)


def is_section_header(line):
    return line.startswith((PATCH_ADD, PATCH_DELETE, PATCH_UPDATE)) or line.strip() == PATCH_END


def hunk_hint(rest):
    """The context hint after `@@`; a unified-diff range is not a hint."""
    hint = rest.strip()
    ranged = _UNIFIED_RANGE.match(hint)
    if ranged:
        hint = ranged.group(1).strip()
    if hint.endswith("@@"):
        hint = hint[:-2].strip()
    return hint


# --------------------------------------------------------------------------
# Operation: patch — applying hunks in memory
# --------------------------------------------------------------------------


class LineDoc:
    """A text file as (body, ending) lines so untouched endings survive."""

    def __init__(self, text):
        self.lines = []
        for part in text.split("\n"):
            if part.endswith("\r"):
                self.lines.append((part[:-1], "\r\n"))
            else:
                self.lines.append((part, "\n"))
        last_body, _ = self.lines.pop()
        self.final_newline = last_body == ""
        if last_body != "":
            self.lines.append((last_body, ""))
        self.newline = "\r\n" if uses_crlf(text) else "\n"

    def bodies(self):
        return [body for body, _ in self.lines]

    def render(self, lines):
        out = []
        for index, (body, ending) in enumerate(lines):
            is_last = index == len(lines) - 1
            if is_last:
                ending = (ending or self.newline) if self.final_newline else ""
            elif ending == "":
                ending = self.newline
            out.append(body + ending)
        return "".join(out)


def apply_hunks(text, hunks, label):
    """New text after applying every hunk, or a patch_failed error."""
    doc = LineDoc(text)
    bodies = doc.bodies()
    edits = []
    pos = 0
    for hunk in hunks:
        start, length = locate_hunk(bodies, hunk, pos, label)
        edits.append((start, length, hunk))
        pos = start + length
    result = []
    cursor = 0
    for start, length, hunk in edits:
        result.extend(doc.lines[cursor:start])
        result.extend(replacement_lines(doc, start, hunk))
        cursor = start + length
    result.extend(doc.lines[cursor:])
    return doc.render(result)


def replacement_lines(doc, start, hunk):
    out = []
    index = start
    for kind, body in hunk.lines:
        if kind == " ":
            out.append(doc.lines[index])
            index += 1
        elif kind == "-":
            index += 1
        else:
            out.append((body, doc.newline))
    return out


def locate_hunk(bodies, hunk, pos, label):
    old = hunk.old_lines()
    search_from = pos
    hint_index = None
    if hunk.hint:
        hint_index = find_hint(bodies, hunk.hint, pos)
        if hint_index is None:
            raise hunk_error(label, hunk, "its @@ context line %r was not found" % hunk.hint)
        search_from = hint_index
    if not old:
        at = hint_index + 1 if (hint_index is not None and not hunk.at_eof) else len(bodies)
        return at, 0
    if hunk.at_eof:
        start = len(bodies) - len(old)
        if start >= search_from and bodies[start:] == old:
            return start, len(old)
        raise hunk_error(label, hunk, "its lines do not match the end of the file")
    found = find_all(bodies, old, search_from)
    if not found:
        raise hunk_error(label, hunk, "its context and removed lines were not found"
                         + (" after the previous hunk" if pos else ""))
    if len(found) > 1:
        where = ", ".join(str(i + 1) for i in found[:10])
        raise hunk_error(label, hunk, "its context matches %d places (lines %s); add "
                         "more context" % (len(found), where))
    return found[0], len(old)


def find_hint(bodies, hint, pos):
    for index in range(pos, len(bodies)):
        if bodies[index] == hint:
            return index
    wanted = hint.strip()
    for index in range(pos, len(bodies)):
        if bodies[index].strip() == wanted:
            return index
    return None


def find_all(bodies, needle, start):
    found = []
    first = needle[0]
    for index in range(start, len(bodies) - len(needle) + 1):
        if bodies[index] == first and bodies[index:index + len(needle)] == needle:
            found.append(index)
    return found


def hunk_error(label, hunk, why):
    return GuestError("patch_failed", "%s, %s: %s; no file was changed"
                      % (label, hunk.label(), why),
                      {"file": label, "hunk": hunk.number})


# --------------------------------------------------------------------------
# Operation: patch — validate everything, then write
# --------------------------------------------------------------------------


class PlannedChange:
    def __init__(self, action, path, data=None, source=None, mode=None):
        self.action = action  # add, delete, update, move
        self.path = path
        self.data = data
        self.source = source
        self.mode = mode

    def describe(self):
        entry = {"path": self.path, "action": self.action}
        if self.source is not None:
            entry["from"] = self.source
        return entry


def op_patch(req):
    a = take_args("patch", req.args, {"patch": Arg("str", required=True, allow_empty=False)})
    sections = PatchParser(a["patch"]).parse()
    plan = plan_patch(req, sections)
    return execute_plan(plan)


def plan_patch(req, sections):
    seen = {}
    plan = []
    for section in sections:
        path = req.resolve(section.raw_path)
        claim_path(seen, path, section)
        if section.action == "add":
            plan.append(plan_add(path, section))
        elif section.action == "delete":
            plan.append(plan_delete(path))
        else:
            target = req.resolve(section.move_to) if section.move_to else path
            if target != path:
                claim_path(seen, target, section)
            plan.append(plan_update(path, target, section))
    return plan


def claim_path(seen, path, section):
    if path in seen:
        raise GuestError("patch_invalid", "invalid patch: %s appears more than once "
                         "(patch lines %d and %d); each file may appear once"
                         % (path, seen[path], section.line_no))
    seen[path] = section.line_no


def plan_add(path, section):
    if lstat_or_none(path) is not None:
        raise GuestError("exists", "cannot add %s: it already exists; no file was changed" % path)
    check_parent_chain(path)
    text = "".join(line + "\n" for line in section.added)
    return PlannedChange("add", path, encode_content("patch", "patch", text))


def plan_delete(path):
    st = lstat_or_none(path)
    if st is None:
        raise GuestError("no_such_file", "cannot delete %s: it does not exist; no file "
                         "was changed" % path)
    if not stat.S_ISREG(st.st_mode):
        raise GuestError("not_a_file", "cannot delete %s: it is a %s, not a regular file; "
                         "no file was changed" % (path, file_type_name(st.st_mode)))
    if not os.access(os.path.dirname(path), os.W_OK | os.X_OK):
        raise GuestError("permission_denied", "cannot delete %s: its directory is not "
                         "writable; no file was changed" % path)
    return PlannedChange("delete", path)


def plan_update(path, target, section):
    text = read_text_file(path)
    new_text = apply_hunks(text, section.hunks, path) if section.hunks else text
    data = encode_content("patch", "patch", new_text)
    if target == path:
        return PlannedChange("update", path, data)
    if lstat_or_none(target) is not None:
        raise GuestError("exists", "cannot move %s to %s: the target exists; no file was "
                         "changed" % (path, target))
    check_parent_chain(target)
    mode = stat.S_IMODE(stat_existing(path).st_mode)
    return PlannedChange("move", target, data, source=path, mode=mode)


def execute_plan(plan):
    done = []
    for change in plan:
        try:
            apply_change(change)
        except GuestError as exc:
            remaining = [c.describe() for c in plan[len(done):]]
            raise GuestError(exc.code, "%s (already applied: %s; not applied: %s)" % (
                exc.message, ", ".join(d["path"] for d in done) or "none",
                ", ".join(r["path"] for r in remaining)),
                {"applied": done, "not_applied": remaining})
        done.append(change.describe())
    return done


def apply_change(change):
    if change.action == "delete":
        try:
            os.unlink(change.path)
        except OSError as exc:
            raise os_error(exc, change.path, "delete")
        return
    if change.action == "add" and lstat_or_none(change.path) is not None:
        raise GuestError("exists", "cannot add %s: it appeared while patching" % change.path)
    atomic_write(change.path, change.data, mode=change.mode)
    if change.action == "move":
        try:
            os.unlink(change.source)
        except OSError as exc:
            raise os_error(exc, change.source, "remove the moved file")


# --------------------------------------------------------------------------
# Globs: ripgrep/globset-compatible translation to Python regexes.
# Paths are matched as raw bytes (decoded latin-1, one char per byte), like
# globset's `(?-u)` regexes; `*` and `?` never match `/`.
# --------------------------------------------------------------------------


class GlobSyntaxError(ValueError):
    pass


def escape_glob_char(char):
    out = []
    for byte in char.encode("utf-8", "surrogateescape"):
        out.append(re.escape(chr(byte)) if byte <= 0x7F else "\\x%02x" % byte)
    return "".join(out)


class GlobParser:
    """Tokenizer for globset's syntax: * ? ** [..] {a,b} and \\ escapes."""

    def __init__(self, glob):
        self.glob = glob
        self.index = 0
        self.prev = None
        self.cur = None
        self.stack = [[]]
        self.shown = glob

    def error(self, why):
        return GlobSyntaxError("error parsing glob %r: %s" % (self.shown, why))

    def bump(self):
        self.prev = self.cur
        if self.index < len(self.glob):
            self.cur = self.glob[self.index]
            self.index += 1
        else:
            self.cur = None
        return self.cur

    def peek(self):
        return self.glob[self.index] if self.index < len(self.glob) else None

    def push(self, token):
        self.stack[-1].append(token)

    def parse(self):
        handlers = {"?": lambda: self.push(("any",)), "*": self.parse_star,
                    "[": self.parse_class, "{": self.push_alternate,
                    "}": self.pop_alternate, ",": self.parse_comma,
                    "\\": self.parse_backslash}
        while True:
            char = self.bump()
            if char is None:
                break
            handler = handlers.get(char)
            if handler:
                handler()
            else:
                self.push(("lit", char))
        if len(self.stack) > 1:
            raise self.error("unclosed alternate group; missing '}'")
        return self.stack[0]

    def parse_backslash(self):
        char = self.bump()
        if char is None:
            raise self.error("dangling '\\'")
        self.push(("lit", char))

    def push_alternate(self):
        if len(self.stack) > 1:
            raise self.error("nested alternate groups are not allowed")
        self.stack.append([])

    def pop_alternate(self):
        alternates = []
        while len(self.stack) >= 2:
            alternates.append(self.stack.pop())
        self.push(("alt", alternates))

    def parse_comma(self):
        if len(self.stack) <= 1:
            self.push(("lit", ","))
        else:
            self.stack.append([])

    def parse_star(self):
        prev = self.prev
        if self.peek() != "*":
            self.push(("star",))
            return
        self.bump()
        if not self.stack[-1]:
            if self.peek() not in (None, "/"):
                self.push(("star",))
                self.push(("star",))
            else:
                self.push(("rprefix",))
                self.bump()
            return
        if prev != "/" and (len(self.stack) <= 1 or prev not in (",", "{")):
            self.push(("star",))
            self.push(("star",))
            return
        self.finish_recursive()

    def finish_recursive(self):
        nxt = self.peek()
        if nxt is None:
            self.bump()
            is_suffix = True
        elif nxt in (",", "}") and len(self.stack) >= 2:
            is_suffix = True
        elif nxt == "/":
            self.bump()
            is_suffix = False
        else:
            self.push(("star",))
            self.push(("star",))
            return
        if not self.stack[-1]:
            raise self.error("unopened alternate group")
        previous = self.stack[-1].pop()
        if previous[0] in ("rprefix", "rsuffix"):
            self.push(previous)
        else:
            self.push(("rsuffix",) if is_suffix else ("rzero",))

    def parse_class(self):
        ranges = []
        negated = self.peek() in ("!", "^")
        if negated:
            self.bump()
        first, in_range = True, False
        while True:
            char = self.bump()
            if char is None:
                raise self.error("unclosed character class; missing ']'")
            if char == "]" and not first:
                break
            if char == "-" and not first:
                if in_range:
                    self.extend_range(ranges, "-")
                in_range = not in_range
            elif in_range:
                self.extend_range(ranges, char)
                in_range = False
            else:
                ranges.append([char, char])
            first = False
        if in_range:
            ranges.append(["-", "-"])
        self.push(("class", negated, ranges))

    def extend_range(self, ranges, char):
        ranges[-1][1] = char
        if ranges[-1][1] < ranges[-1][0]:
            raise self.error("invalid range %s-%s" % (ranges[-1][0], char))


def tokens_to_regex(tokens):
    out = []
    for token in tokens:
        kind = token[0]
        if kind == "lit":
            out.append(escape_glob_char(token[1]))
        elif kind == "any":
            out.append("[^/]")
        elif kind == "star":
            out.append("[^/]*")
        elif kind == "rprefix":
            out.append("(?:/?|.*/)")
        elif kind == "rsuffix":
            out.append("/.*")
        elif kind == "rzero":
            out.append("(?:/|/.*/)")
        elif kind == "class":
            out.append(class_to_regex(token[1], token[2]))
        else:
            parts = [p for p in (tokens_to_regex(alt) for alt in token[1]) if p]
            if parts:
                out.append("(?:" + "|".join(parts) + ")")
    return "".join(out)


def class_to_regex(negated, ranges):
    body = []
    for low, high in ranges:
        body.append(escape_glob_char(low))
        if low != high:
            body.append("-" + escape_glob_char(high))
    return "[" + ("^" if negated else "") + "".join(body) + "]"


def compile_glob(glob, shown=None):
    """Regex for a glob; errors name `shown` (the text the user wrote)."""
    parser = GlobParser(glob)
    parser.shown = shown or glob
    tokens = parser.parse()
    if tokens == [("rprefix",)]:
        return re.compile(".*", re.DOTALL)
    try:
        return re.compile(tokens_to_regex(tokens), re.DOTALL)
    except re.error as exc:
        raise GlobSyntaxError("error parsing glob %r: %s" % (parser.shown, exc))


# --------------------------------------------------------------------------
# Gitignore-style rule lists (.gitignore/.ignore/.rgignore, rg --glob, and
# manifest excludes), with ripgrep's parsing rules.  The last match wins.
# --------------------------------------------------------------------------


class Rule:
    def __init__(self, regex, whitelist, only_dir):
        self.regex = regex
        self.whitelist = whitelist
        self.only_dir = only_dir


def parse_rule(line):
    """A Rule for one ignore line, None for blanks/comments; may raise."""
    original = line
    if line.startswith("#"):
        return None
    if not line.endswith("\\ "):
        line = line.rstrip()
    if line == "":
        return None
    whitelist = anchored = only_dir = False
    if line.startswith(("\\!", "\\#")):
        line = line[1:]
    else:
        if line.startswith("!"):
            whitelist, line = True, line[1:]
        if line.startswith("/"):
            anchored, line = True, line[1:]
    if line.endswith("/"):
        only_dir, line = True, line[:-1]
        if line.endswith("\\"):
            line = line[:-1]
    glob = line
    if not anchored and "/" not in glob and not (glob.startswith("**/") or glob == "**"):
        glob = "**/" + glob
    if glob.endswith("/**"):
        glob += "/*"
    return Rule(compile_glob(glob, original.strip()), whitelist, only_dir)


def parse_rules(lines, strict, errors=None):
    """Rules from lines; invalid globs raise when strict, else are skipped
    (and described in `errors` when a list is given)."""
    rules = []
    for number, line in enumerate(lines, 1):
        try:
            rule = parse_rule(line)
        except GlobSyntaxError as exc:
            if strict:
                raise
            if errors is not None:
                errors.append("line %d: %s" % (number, exc))
            continue
        if rule is not None:
            rules.append(rule)
    return rules


def match_rules(rules, path, is_dir):
    """'ignore', 'whitelist' or None for a latin-1 path; last rule wins."""
    for rule in reversed(rules):
        if rule.only_dir and not is_dir:
            continue
        if rule.regex.fullmatch(path):
            return "whitelist" if rule.whitelist else "ignore"
    return None


def read_ignore_file(path, errors):
    """Rules of an ignore file; like rg, stop at the first non-UTF-8 line.

    Problems are appended to `errors` as text naming the file.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    except OSError as exc:
        errors.append("%s: %s" % (bytes_to_text(path), exc.strerror))
        return []
    lines = []
    for index, raw in enumerate(data.split(b"\n")):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            errors.append("%s: line %d is not valid UTF-8" % (bytes_to_text(path), index + 1))
            break
        lines.append(line.lstrip("\ufeff") if index == 0 else line)
    problems = []
    rules = parse_rules(lines, strict=False, errors=problems)
    errors.extend("%s: %s" % (bytes_to_text(path), p) for p in problems)
    return rules


class Overrides:
    """rg --glob semantics: a match is final; plain globs whitelist files."""

    def __init__(self, globs):
        self.rules = parse_rules(globs, strict=True)
        self.has_whitelist = any(not r.whitelist for r in self.rules)

    def match(self, path, is_dir):
        if not self.rules:
            return None
        found = match_rules(self.rules, path, is_dir)
        if found == "ignore":
            return "whitelist"
        if found == "whitelist":
            return "ignore"
        if self.has_whitelist and not is_dir:
            return "ignore"
        return None


# --------------------------------------------------------------------------
# Tree walking with ripgrep's file selection (pure-Python engine)
# --------------------------------------------------------------------------

IGNORE_FILES = ((b".rgignore", "custom"), (b".ignore", "ignore"), (b".gitignore", "git"))


class IgnoreDir:
    """Ignore rules found in one directory, matched relative to `base`."""

    def __init__(self, directory, base):
        self.base = base  # bytes; relative (in-tree) or absolute (parents)
        self.has_git = os.path.exists(os.path.join(directory, b".git"))
        self.errors = []
        self.rules = {kind: read_ignore_file(os.path.join(directory, name), self.errors)
                      for name, kind in IGNORE_FILES}

    def relative(self, path):
        if self.base in (b"", b"/"):
            return path[len(self.base):]
        return path[len(self.base) + 1:]


class RipgrepWalker:
    """Yields files as `rg --files --sort path` would select them."""

    def __init__(self, root, overrides, hidden):
        self.root = root  # bytes, directory to walk
        self.real_root = os.path.realpath(root)
        self.overrides = overrides
        self.hidden = hidden
        self.errors = []
        self.parents = self.load_parents()
        self.parents_have_git = any(p.has_git for p in self.parents)
        # rg fails (exit 2) on broken ignore files above the root; broken
        # ones inside the tree only produce warnings.
        for parent in self.parents:
            self.errors.extend(parent.errors)

    def load_parents(self):
        parents = []
        current = self.real_root
        while current != b"/":
            current = os.path.dirname(current)
            parents.append(IgnoreDir(current, current))
        return parents

    def files(self):
        """(relative path bytes, absolute path bytes) in rg's sorted order."""
        yield from self.walk(self.root, b"", [IgnoreDir(self.root, b"")])

    def walk(self, directory, rel, stack):
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self.errors.append("%s: %s" % (bytes_to_text(directory), exc.strerror))
            return
        for entry in entries:
            child = rel + b"/" + entry.name if rel else entry.name
            is_dir = entry_is_dir(entry)
            if self.skipped(child, entry.name, is_dir, stack):
                continue
            if is_dir:
                yield from self.walk(entry.path, child, stack + [IgnoreDir(entry.path, child)])
            elif entry_is_file(entry):
                yield child, entry.path

    def skipped(self, rel, name, is_dir, stack):
        text = rel.decode("latin-1")
        found = self.overrides.match(text, is_dir)
        if found is not None:
            return found == "ignore"
        found = self.ignored(rel, is_dir, stack)
        if found is not None:
            return found == "ignore"
        return not self.hidden and name.startswith(b".")

    def ignored(self, rel, is_dir, stack):
        any_git = self.parents_have_git or any(d.has_git for d in stack)
        found = {"custom": None, "ignore": None, "git": None}
        saw_git = self.collect(found, reversed(stack), rel, is_dir, any_git, False)
        absolute = os.path.join(self.real_root, rel)
        self.collect(found, self.parents, absolute, is_dir, any_git, saw_git)
        for kind in ("custom", "ignore", "git"):
            if found[kind] is not None:
                return found[kind]
        return None

    def collect(self, found, dirs, path, is_dir, any_git, saw_git):
        for ig in dirs:
            text = ig.relative(path).decode("latin-1")
            for kind in ("custom", "ignore"):
                if found[kind] is None:
                    found[kind] = match_rules(ig.rules[kind], text, is_dir)
            if any_git and not saw_git and found["git"] is None:
                found["git"] = match_rules(ig.rules["git"], text, is_dir)
            saw_git = saw_git or ig.has_git
        return saw_git


def entry_is_dir(entry):
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def entry_is_file(entry):
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


# --------------------------------------------------------------------------
# ripgrep runner: streamed, bounded, killed once the limit is exceeded
# --------------------------------------------------------------------------


def ripgrep_path():
    if os.environ.get(NO_RG_ENV, "") not in ("", "0"):
        return None
    return shutil.which("rg")


RG_COMMON = ["--no-config", "--color", "never", "--sort", "path",
             "--no-ignore-global", "--no-ignore-exclude", "--null"]


class RipgrepRun:
    """One rg process whose stdout is consumed incrementally."""

    def __init__(self, argv, cwd):
        env = dict(os.environ)
        env.pop("RIPGREP_CONFIG_PATH", None)
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=env)
        except OSError as exc:
            raise GuestError("search_failed", "cannot run rg: %s" % exc)
        self.stderr = bytearray()
        self.killed = False
        self.reader = threading.Thread(target=self.drain_stderr, daemon=True)
        self.reader.start()

    def drain_stderr(self):
        for chunk in iter(lambda: self.proc.stderr.read(4096), b""):
            if len(self.stderr) < 64 * 1024:
                self.stderr.extend(chunk)

    def chunks(self):
        fd = self.proc.stdout.fileno()
        while not self.killed:
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                return
            yield chunk

    def stop(self):
        self.killed = True
        self.proc.kill()

    def finish(self):
        self.proc.stdout.close()
        code = self.proc.wait()
        self.reader.join()
        self.proc.stderr.close()
        if self.killed or code in (0, 1):
            return
        message = bytes_to_text(bytes(self.stderr)).strip() or "rg exited with status %d" % code
        raise GuestError("search_failed", "rg failed: %s" % message[:4000])


# --------------------------------------------------------------------------
# Operation: glob
# --------------------------------------------------------------------------


def op_glob(req):
    a = take_args("glob", req.args, {
        "pattern": Arg("str", required=True, allow_empty=False),
        "path": path_arg(required=False),
        "limit": limit_arg(SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT),
        "hidden": Arg("bool", default=False),
    })
    root = req.resolve(a["path"]) if a["path"] else req.cwd
    if not stat.S_ISDIR(stat_existing(root).st_mode):
        raise GuestError("not_a_directory", "glob: %s is not a directory" % root)
    globs = [a["pattern"], "!.git"]
    rg = ripgrep_path()
    if rg:
        found, truncated = glob_with_rg(rg, root, globs, a["hidden"], a["limit"])
    else:
        found, truncated = glob_with_python(root, globs, a["hidden"], a["limit"])
    prefix = display_prefix(req.cwd, root)
    files = [prefix + bytes_to_text(rel) for rel in found]
    return {"files": files, "truncated": truncated,
            "text": listing_text(files, truncated, "files")}


def glob_with_rg(rg, root, globs, hidden, limit):
    argv = [rg, "--files"] + RG_COMMON + (["--hidden"] if hidden else [])
    for glob in globs:
        argv += ["--glob", glob]
    run = RipgrepRun(argv + ["--", "."], root)
    found, buffer = [], b""
    for chunk in run.chunks():
        *records, buffer = (buffer + chunk).split(b"\x00")
        found.extend(strip_dot_slash(r) for r in records)
        if len(found) > limit:
            run.stop()
    run.finish()
    return found[:limit], len(found) > limit


def strip_dot_slash(raw):
    return raw[2:] if raw.startswith(b"./") else raw


def glob_with_python(root, globs, hidden, limit):
    walker = RipgrepWalker(os.fsencode(root), search_overrides(globs), hidden)
    found = []
    for rel, _ in walker.files():
        found.append(rel)
        if len(found) > limit:
            return found[:limit], True
    raise_walk_errors(walker)
    return found, False


def search_overrides(globs):
    try:
        return Overrides(globs)
    except GlobSyntaxError as exc:
        raise GuestError("search_failed", str(exc))


def raise_walk_errors(walker):
    if walker.errors:
        raise GuestError("search_failed", "; ".join(walker.errors[:20]))


def listing_text(items, truncated, noun):
    if not items:
        return NO_MATCHES
    text = "\n".join(items)
    if truncated:
        text += ("\n\n(Results truncated: showing the first %d %s. Use a more specific "
                 "pattern or path.)" % (len(items), noun))
    return text


# --------------------------------------------------------------------------
# Operation: grep
# --------------------------------------------------------------------------


class MatchCollector:
    """Matches grouped per file; a file found to be binary is dropped whole."""

    def __init__(self, limit):
        self.limit = limit
        self.committed = []
        self.count = 0
        self.pending_path = None
        self.pending = []

    def add(self, path, line_no, text):
        if path != self.pending_path:
            self.commit()
            self.pending_path = path
        if self.count + len(self.pending) <= self.limit:
            self.pending.append((path, line_no, text))
        else:
            self.pending.append(None)  # counted, not kept

    def drop(self, path):
        if path == self.pending_path:
            self.pending = []

    def commit(self):
        kept = [m for m in self.pending if m is not None]
        self.committed.extend(kept[:max(0, self.limit - len(self.committed))])
        self.count += len(self.pending)
        self.pending = []
        self.pending_path = None

    def full(self):
        return self.count > self.limit


def op_grep(req):
    a = take_args("grep", req.args, {
        "pattern": Arg("str", required=True, allow_empty=False),
        "path": path_arg(required=False),
        "include": Arg("str", allow_empty=False),
        "literal": Arg("bool", default=False),
        "caseSensitive": Arg("bool", default=False),
        "limit": limit_arg(SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT),
    })
    if "\n" in a["pattern"] or "\r" in a["pattern"]:
        raise bad_args("grep", "pattern must be a single line (searches are line by line)")
    target = req.resolve(a["path"]) if a["path"] else req.cwd
    scope = GrepScope(req.cwd, target)
    globs = ([a["include"]] if a["include"] else []) + ["!.git"]
    collector = MatchCollector(a["limit"])
    if scope.file is None or not file_is_binary(target):
        rg = ripgrep_path()
        if rg:
            grep_with_rg(rg, scope, globs, a, collector)
        else:
            grep_with_python(scope, globs, a, collector)
    collector.commit()
    return grep_result(scope, collector)


class GrepScope:
    """Where to search: a directory root, or one explicit file in it."""

    def __init__(self, cwd, target):
        mode = stat_existing(target).st_mode
        if stat.S_ISDIR(mode):
            self.root, self.file = target, None
        elif stat.S_ISREG(mode):
            self.root, self.file = os.path.dirname(target), os.path.basename(target)
        else:
            raise GuestError("not_a_file", "grep: %s is not a file or directory" % target)
        self.prefix = display_prefix(cwd, self.root)


def grep_result(scope, collector):
    matches = []
    lines = []
    for path, line_no, text in collector.committed:
        shown = scope.prefix + bytes_to_text(path)
        text = strip_cr(text)
        matches.append({"path": shown, "line": line_no, "text": text})
        lines.append("%s:%d:%s" % (shown, line_no, text))
    truncated = collector.full()
    return {"matches": matches, "truncated": truncated,
            "text": listing_text(lines, truncated, "matches")}


def line_text(line, length):
    """What a matching line shows: itself, or a placeholder when too long."""
    if length > MAX_COLUMNS:
        return OMITTED_LINE
    return bytes_to_text(line)


# ---- grep through rg -----------------------------------------------------

_RG_BINARY_NOTICE = re.compile(
    rb"^(.*): (?:WARNING: stopped searching binary file after match|binary file matches)"
    rb" \(found .* byte around offset \d+\)$", re.DOTALL)


def grep_with_rg(rg, scope, globs, a, collector):
    argv = [rg, "--line-number", "--no-heading", "--with-filename",
            "--max-columns", str(MAX_COLUMNS)] + RG_COMMON
    if a["literal"]:
        argv.append("--fixed-strings")
    if not a["caseSensitive"]:
        argv.append("--ignore-case")
    for glob in globs:
        argv += ["--glob", glob]
    argv += ["-e", a["pattern"], "--", scope.file or "."]
    run = RipgrepRun(argv, scope.root)
    parser = RgGrepParser(collector)
    for chunk in run.chunks():
        parser.feed(chunk)
        if collector.full():
            run.stop()
    if not run.killed:
        parser.finish()
    run.finish()


class RgGrepParser:
    """Parses `path NUL line:text LF` records and binary-file notices."""

    def __init__(self, collector):
        self.collector = collector
        self.buffer = b""

    def feed(self, chunk):
        self.buffer += chunk
        pos = 0
        while not self.collector.full():
            consumed = self.next_record(pos)
            if consumed is None:
                break
            pos = consumed
        self.buffer = self.buffer[pos:]

    def next_record(self, pos):
        buf = self.buffer
        newline = buf.find(b"\n", pos)
        nul = buf.find(b"\x00", pos)
        if newline != -1 and (nul == -1 or newline < nul):
            notice = _RG_BINARY_NOTICE.match(buf[pos:newline])
            if notice:
                self.collector.drop(strip_dot_slash(notice.group(1)))
                return newline + 1
        if nul == -1:
            return None
        end = buf.find(b"\n", nul + 1)
        if end == -1:
            return None
        self.record(buf[pos:nul], buf[nul + 1:end])
        return end + 1

    def record(self, path, rest):
        number, sep, text = rest.partition(b":")
        if sep and number.isdigit():
            # rg already applied --max-columns to `text`
            self.collector.add(strip_dot_slash(path), int(number), bytes_to_text(text))

    def finish(self):
        self.buffer = b""


# ---- grep in Python --------------------------------------------------------


def compile_search(pattern, literal, case_sensitive):
    flags = 0 if case_sensitive else re.IGNORECASE
    try:
        return re.compile(re.escape(pattern) if literal else pattern, flags)
    except re.error as exc:
        raise GuestError("search_failed", "invalid regular expression %r: %s" % (pattern, exc))


def grep_with_python(scope, globs, a, collector):
    regex = compile_search(a["pattern"], a["literal"], a["caseSensitive"])
    root = os.fsencode(scope.root)
    if scope.file is not None:
        name = os.fsencode(scope.file)
        search_one_file(os.path.join(root, name), name, regex, collector, [])
        return
    walker = RipgrepWalker(root, search_overrides(globs), False)
    for rel, absolute in walker.files():
        search_one_file(absolute, rel, regex, collector, walker.errors)
        if collector.full():
            return
    raise_walk_errors(walker)


def search_one_file(absolute, rel, regex, collector, errors):
    try:
        fd = os.open(absolute, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        errors.append("%s: %s" % (bytes_to_text(rel), exc.strerror))
        return
    try:
        binary = scan_lines(fd, regex, lambda n, t: collector.add(rel, n, t))
    except OSError as exc:
        errors.append("%s: %s" % (bytes_to_text(rel), exc.strerror))
        collector.drop(rel)
        return
    finally:
        os.close(fd)
    if binary:
        collector.drop(rel)
    collector.commit()


def scan_lines(fd, regex, on_match):
    """Report matching lines; True (stop) as soon as the text holds NUL."""
    pending = bytearray()
    line_no = 0
    for chunk in decoded_chunks(fd):
        if b"\x00" in chunk:
            return True
        start = 0
        newline = chunk.find(b"\n")
        while newline != -1:
            pending += chunk[start:newline]
            line_no += 1
            match_line(regex, bytes(pending), len(pending) + 1, line_no, on_match)
            pending = bytearray()
            start = newline + 1
            newline = chunk.find(b"\n", start)
        pending += chunk[start:]
    if pending:
        match_line(regex, bytes(pending), len(pending), line_no + 1, on_match)
    return False


def match_line(regex, line, length, line_no, on_match):
    if regex.search(line.decode("utf-8", "surrogateescape")):
        on_match(line_no, line_text(line, length))


def decoded_chunks(fd):
    """File contents as rg searches them: UTF-16 (BOM) transcoded, UTF-8 BOM dropped."""
    first = os.read(fd, READ_CHUNK)
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if first.startswith(bom):
            raw = first + read_to_end(fd)
            data = raw[len(bom):].decode(codec, "replace").encode("utf-8")
            for start in range(0, len(data), READ_CHUNK):
                yield data[start:start + READ_CHUNK]
            return
    if first.startswith(b"\xef\xbb\xbf"):
        first = first[3:]
    while first:
        yield first
        first = os.read(fd, READ_CHUNK)


def read_to_end(fd):
    chunks = []
    for chunk in iter(lambda: os.read(fd, READ_CHUNK), b""):
        chunks.append(chunk)
    return b"".join(chunks)


def file_is_binary(path):
    """An explicit grep target holding NUL (after transcoding) is skipped."""
    fd = open_for_read(path)
    try:
        return any(b"\x00" in chunk for chunk in decoded_chunks(fd))
    except OSError as exc:
        raise os_error(exc, path, "read")
    finally:
        os.close(fd)


# --------------------------------------------------------------------------
# Operations: stat, list
# --------------------------------------------------------------------------


def op_stat(req):
    a = take_args("stat", req.args, {"path": path_arg()})
    path = req.resolve(a["path"])
    st = stat_existing(path, follow=False)
    result = {
        "path": path,
        "type": file_type_name(st.st_mode),
        "size": st.st_size,
        "mode": octal_mode(st.st_mode),
        "mtime": st.st_mtime,
        "uid": st.st_uid,
        "gid": st.st_gid,
    }
    if stat.S_ISLNK(st.st_mode):
        result.update(path_fields(os.readlink(os.fsencode(path)), "target"))
    return result


def op_list(req):
    a = take_args("list", req.args, {
        "path": path_arg(required=False),
        "recursive": Arg("bool", default=False),
        "limit": limit_arg(LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT),
    })
    root = req.resolve(a["path"]) if a["path"] else req.cwd
    if not stat.S_ISDIR(stat_existing(root).st_mode):
        raise GuestError("not_a_directory", "list: %s is not a directory" % root)
    lister = DirLister(a["recursive"], a["limit"])
    lister.walk(os.fsencode(root), b"")
    result = {"path": root, "entries": lister.entries, "truncated": lister.truncated}
    if lister.errors:
        result["errors"] = lister.errors[:100]
    return result


class DirLister:
    def __init__(self, recursive, limit):
        self.recursive = recursive
        self.limit = limit
        self.entries = []
        self.truncated = False
        self.errors = []

    def walk(self, directory, rel):
        try:
            with os.scandir(directory) as it:
                found = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if not rel:
                raise os_error(exc, bytes_to_text(directory), "list")
            self.errors.append({"path": bytes_to_text(rel), "message": exc.strerror})
            return
        for entry in found:
            if len(self.entries) >= self.limit:
                self.truncated = True
                return
            child = rel + b"/" + entry.name if rel else entry.name
            self.entries.append(describe_entry(entry, child))
            if self.recursive and entry_is_dir(entry):
                self.walk(entry.path, child)
                if self.truncated:
                    return


def describe_entry(entry, rel):
    try:
        st = entry.stat(follow_symlinks=False)
        kind, size = file_type_name(st.st_mode), st.st_size
    except OSError:
        kind, size = "unknown", 0
    item = path_fields(rel, "name")
    item.update({"type": kind, "size": size})
    if kind == "symlink":
        try:
            item.update(path_fields(os.readlink(entry.path), "target"))
        except OSError:
            pass
    return item


# --------------------------------------------------------------------------
# Operations: mkdir, remove, move
# --------------------------------------------------------------------------


def op_mkdir(req):
    a = take_args("mkdir", req.args, {"path": path_arg(), "parents": Arg("bool", default=True)})
    path = req.resolve(a["path"])
    st = lstat_or_none(path)
    if st is not None:
        if stat.S_ISDIR(stat_existing(path).st_mode):
            return {"path": path, "created": False}
        raise GuestError("exists", "mkdir: %s exists and is not a directory" % path)
    try:
        if a["parents"]:
            os.makedirs(path, exist_ok=True)
        else:
            os.mkdir(path)
    except FileExistsError:
        raise GuestError("not_a_directory", "mkdir: a parent of %s is not a directory" % path)
    except OSError as exc:
        raise os_error(exc, path, "create directory")
    return {"path": path, "created": True}


def refuse_protected(req, path, op):
    if path == "/" or is_same_or_inside(req.cwd, path):
        raise GuestError("refused", "%s: refusing to touch %s: it is / or contains the "
                         "working directory %s" % (op, path, req.cwd))


def op_remove(req):
    a = take_args("remove", req.args, {"path": path_arg(), "recursive": Arg("bool", default=False)})
    path = req.resolve(a["path"])
    refuse_protected(req, path, "remove")
    st = lstat_or_none(path)
    if st is None:
        raise GuestError("no_such_file", "remove: %s does not exist" % path)
    kind = file_type_name(st.st_mode)
    if kind == "directory":
        remove_directory(path, a["recursive"])
    else:
        try:
            os.unlink(path)
        except OSError as exc:
            raise os_error(exc, path, "remove")
    return {"path": path, "type": kind}


def remove_directory(path, recursive):
    if not recursive:
        try:
            os.rmdir(path)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise GuestError("not_empty", "remove: %s is a non-empty directory; pass "
                                 "recursive: true to delete it and its contents" % path)
            raise os_error(exc, path, "remove")
        return
    failures = []
    if sys.version_info >= (3, 12):  # onerror is deprecated from 3.12 on
        shutil.rmtree(path, onexc=lambda fn, p, exc: failures.append((p, exc)))
    else:
        shutil.rmtree(path, onerror=lambda fn, p, info: failures.append((p, info[1])))
    if failures:
        where, exc = failures[0]
        if isinstance(exc, OSError):
            raise os_error(exc, where, "remove")
        raise GuestError("io_error", "remove: %s: %s" % (where, exc))


def op_move(req):
    a = take_args("move", req.args, {
        "from": path_arg(), "to": path_arg(), "overwrite": Arg("bool", default=False),
    })
    source, target = req.resolve(a["from"]), req.resolve(a["to"])
    if source == target:
        raise bad_args("move", "from and to are the same path")
    refuse_protected(req, source, "move")
    source_st = lstat_or_none(source)
    if source_st is None:
        raise GuestError("no_such_file", "move: %s does not exist" % source)
    if stat.S_ISDIR(source_st.st_mode) and is_same_or_inside(target, source):
        raise bad_args("move", "cannot move %s into itself (%s)" % (source, target))
    check_move_target(source_st, target, a["overwrite"])
    make_parents(target)
    rename_or_copy(source, target)
    return {"from": source, "to": target}


def check_move_target(source_st, target, overwrite):
    target_st = lstat_or_none(target)
    if target_st is None:
        return
    if not overwrite:
        raise GuestError("exists", "move: %s already exists; pass overwrite: true to "
                         "replace it" % target)
    if stat.S_ISDIR(target_st.st_mode) and not stat.S_ISDIR(source_st.st_mode):
        raise GuestError("is_directory", "move: %s is a directory; a file cannot "
                         "replace it" % target)
    if stat.S_ISDIR(source_st.st_mode) and not stat.S_ISDIR(target_st.st_mode):
        raise GuestError("not_a_directory", "move: %s is not a directory; a directory "
                         "cannot replace it" % target)


def rename_or_copy(source, target):
    try:
        os.replace(source, target)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise os_error(exc, target, "move %s to" % source)
    copy_across_devices(source, target)


def copy_across_devices(source, target):
    """rename(2) cannot cross filesystems: copy beside the target, then swap."""
    temp = os.path.join(os.path.dirname(target), TEMP_PREFIX + secrets.token_hex(8))
    try:
        if os.path.isdir(source) and not os.path.islink(source):
            shutil.copytree(source, temp, symlinks=True)
        else:
            shutil.copy2(source, temp, follow_symlinks=False)
        if os.path.isdir(target) and not os.path.islink(target):
            os.rmdir(target)  # only an empty directory can be overwritten
        os.replace(temp, target)
    except OSError as exc:
        if os.path.isdir(temp):
            shutil.rmtree(temp, ignore_errors=True)
        else:
            discard_temp(None, temp)
        raise os_error(exc, target, "move %s to" % source)
    try:
        if os.path.isdir(source) and not os.path.islink(source):
            shutil.rmtree(source)
        else:
            os.unlink(source)
    except OSError as exc:
        raise os_error(exc, source, "remove the source after copying")


# --------------------------------------------------------------------------
# Operation: manifest (for the sync engine)
# --------------------------------------------------------------------------


def op_manifest(req):
    a = take_args("manifest", req.args, {
        "path": path_arg(required=False),
        "sha256": Arg("bool", default=False),
        "excludes": Arg("str_list", default=[]),
    })
    root = req.resolve(a["path"]) if a["path"] else req.cwd
    if not stat.S_ISDIR(stat_existing(root).st_mode):
        raise GuestError("not_a_directory", "manifest: %s is not a directory" % root)
    try:
        excludes = parse_rules(a["excludes"], strict=True)
    except GlobSyntaxError as exc:
        raise bad_args("manifest", str(exc))
    found = []
    collect_manifest(os.fsencode(root), b"", excludes, found)
    found.sort(key=lambda item: item[0])
    entries = [manifest_entry(rel, full, st, a["sha256"]) for rel, full, st in found]
    return {"root": root, "entries": entries, "count": len(entries)}


def collect_manifest(directory, rel, excludes, found):
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError as exc:
        raise os_error(exc, bytes_to_text(directory), "list")
    for entry in entries:
        child = rel + b"/" + entry.name if rel else entry.name
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            raise os_error(exc, bytes_to_text(entry.path), "stat")
        is_dir = stat.S_ISDIR(st.st_mode)
        if match_rules(excludes, child.decode("latin-1"), is_dir) == "ignore":
            continue
        if is_dir:
            collect_manifest(entry.path, child, excludes, found)
        elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            found.append((child, entry.path, st))


def manifest_entry(rel, full, st, with_hash):
    item = path_fields(rel)
    is_link = stat.S_ISLNK(st.st_mode)
    item.update({
        "type": "symlink" if is_link else "file",
        "size": st.st_size,
        "mtime": st.st_mtime,
        "mtime_ns": st.st_mtime_ns,
        "mode": octal_mode(st.st_mode),
    })
    if is_link:
        try:
            item.update(path_fields(os.readlink(full), "target"))
        except OSError as exc:
            raise os_error(exc, bytes_to_text(full), "read link")
    elif with_hash:
        item["sha256"] = sha256_file(full)
    return item


def sha256_file(path):
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise os_error(exc, bytes_to_text(path), "read")
    digest = hashlib.sha256()
    try:
        for chunk in iter(lambda: os.read(fd, 1024 * 1024), b""):
            digest.update(chunk)
    except OSError as exc:
        raise os_error(exc, bytes_to_text(path), "read")
    finally:
        os.close(fd)
    return digest.hexdigest()


# --------------------------------------------------------------------------
# Requests and dispatch
# --------------------------------------------------------------------------

OPERATIONS = {
    "read": op_read, "write": op_write, "edit": op_edit, "patch": op_patch,
    "glob": op_glob, "grep": op_grep, "stat": op_stat, "list": op_list,
    "mkdir": op_mkdir, "remove": op_remove, "move": op_move, "manifest": op_manifest,
}
REQUEST_KEYS = {"v", "op", "cwd", "args"}


class Request:
    def __init__(self, op, cwd, args):
        self.op = op
        self.cwd = cwd
        self.args = args

    def resolve(self, raw, what="path"):
        return normalize_path(raw, self.cwd, what)


def decode_object(raw):
    """The JSON object of a request's bytes."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise GuestError("bad_request", "the request is not valid UTF-8 JSON: %s" % exc)
    if not isinstance(body, dict):
        raise GuestError("bad_request", "the request must be a JSON object")
    return body


def check_envelope(body, keys):
    """Refuse another protocol version and fields outside `keys`."""
    version = body.get("v")
    if isinstance(version, bool) or version != PROTOCOL_VERSION:
        raise GuestError("unsupported_version", "protocol version %r is not supported; this "
                         "helper speaks version %d" % (version, PROTOCOL_VERSION))
    unknown = sorted(set(body) - keys)
    if unknown:
        raise GuestError("bad_request", "unknown request field(s): %s" % ", ".join(unknown))


def parse_request(raw):
    body = decode_object(raw)
    check_envelope(body, REQUEST_KEYS)
    return build_request(body)


def build_request(body):
    op = body.get("op")
    if not isinstance(op, str):
        raise GuestError("bad_request", "'op' must be a string")
    if op not in OPERATIONS:
        raise GuestError("unknown_op", "unknown operation %r; known: %s"
                         % (op, ", ".join(sorted(OPERATIONS))))
    cwd = body.get("cwd")
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        raise GuestError("bad_request", "'cwd' must be an absolute path")
    args = body.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise GuestError("bad_request", "'args' must be a JSON object")
    return Request(op, normalize_path(cwd, "/", "cwd"), args)


def handle(raw):
    request = parse_request(raw)
    return OPERATIONS[request.op](request)


def answer_for(raw):
    return answer_of(lambda: handle(raw))


def answer_of(work):
    """{"v", "result"} of `work()`, or {"v", "error"}: every failure becomes an answer."""
    try:
        return {"v": PROTOCOL_VERSION, "result": work()}
    except GuestError as exc:
        return {"v": PROTOCOL_VERSION, "error": exc.to_json()}
    except OSError as exc:
        error = os_error(exc, exc.filename or "a file", "access")
        return {"v": PROTOCOL_VERSION, "error": error.to_json()}
    except RecursionError:
        error = GuestError("internal", "the directory tree is too deep to walk")
        return {"v": PROTOCOL_VERSION, "error": error.to_json()}
    except Exception as exc:  # a bug must still produce an answer
        error = GuestError("internal", "%s: %s" % (type(exc).__name__, exc))
        return {"v": PROTOCOL_VERSION, "error": error.to_json()}


# --------------------------------------------------------------------------
# Resident mode (`serve`): one long-lived helper per sandbox, JSON lines both ways
# --------------------------------------------------------------------------
#
#   first line : {"v": 1, "ready": {"pid": <int>, "python": "3.x.y"}}
#   request    : {"v": 1, "id": <int>, "op": "<name>", "cwd": "/abs", "args": {...}}
#   answer     : {"v": 1, "id": <int>, "result": ...} or {"v": 1, "id": <int>, "error": {...}}
#   exec output: {"v": 1, "id": <int>, "stream": "stdout"|"stderr", "data": "<base64>"}
#                (before the exec's answer)
#   last line  : {"v": 1, "bye": "<why>"} when the helper ends on its own
#
# File operations run one at a time on one worker thread, so an edit's read-modify-write never
# interleaves with another file operation; every `exec` runs on threads of its own. `cancel`
# stops an exec's whole process tree. End of stdin stops every exec and ends the helper; so
# does an idle period with nothing running (COS_GUEST_IDLE_EXIT seconds, default 1800).


SERVE_OPS = ("exec", "cancel", "ping")
SERVE_KEYS = REQUEST_KEYS | {"id"}
IDLE_EXIT_ENV = "COS_GUEST_IDLE_EXIT"
DEFAULT_IDLE_EXIT = 30 * 60
RUN_TAG_ENV = "COS_GUEST_RUN"
RUN_CHUNK = 64 * 1024
RUN_DEFAULT_MAX = 1024 * 1024
RUN_MAX_BYTES = 16 * 1024 * 1024
RUN_POLL = 0.05
RUN_DRAIN_LIMIT = 8 * 1024 * 1024
MAX_GRACE_MS = 60000


def parse_serve_request(line):
    """(id, Request) of one request line; a GuestError carries the id when it was readable."""
    try:
        body = decode_object(line)
    except GuestError as exc:
        raise ServeError(None, exc)
    rid = body.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int) or rid < 0:
        raise ServeError(None, GuestError("bad_request", "'id' must be a non-negative integer"))
    try:
        check_envelope(body, SERVE_KEYS)
        rest = {k: v for k, v in body.items() if k != "id"}
        if rest.get("op") in SERVE_OPS:
            rest["op"] = "stat"  # validate cwd and args like any request
            request = build_request(rest)
            request.op = body["op"]
        else:
            request = build_request(rest)
    except GuestError as exc:
        raise ServeError(rid, exc)
    return rid, request


class ServeError(Exception):
    def __init__(self, rid, error):
        super().__init__(error.message)
        self.rid = rid
        self.error = error


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "SIG%d" % number


def proc_stat(pid):
    """(ppid, pgrp, session, zombie) of a process, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            text = handle.read().decode("latin-1")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    if len(fields) < 4:
        return None
    try:
        return int(fields[1]), int(fields[2]), int(fields[3]), fields[0] in ("Z", "X")
    except ValueError:
        return None


def has_tag(pid, marker):
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            return marker in b"\0" + handle.read()
    except OSError:
        return False


def tree_members(leader, tag):
    """Live processes of a run: its session and process group, every descendant of the
    leader, and every process that inherited the run's tag (orphans re-parented to init that
    kept their environment)."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    marker = ("\0%s=%s\0" % (RUN_TAG_ENV, tag)).encode("ascii")
    me = os.getpid()
    stats = {}
    for pid in pids:
        st = proc_stat(pid)
        if st is not None:
            stats[pid] = st
    children = {}
    for pid, (ppid, _, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    found = set()
    stack = [leader]
    while stack:
        pid = stack.pop()
        for child in children.get(pid, ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    for pid, (_, pgrp, session, _) in stats.items():
        if pid == leader or pgrp == leader or session == leader or has_tag(pid, marker):
            found.add(pid)
    return sorted(pid for pid in found if pid in stats and pid != me and not stats[pid][3])


class Run:
    """One `exec`: a command in a new session, its output forwarded as it comes."""

    def __init__(self, server, rid, argv, cwd, max_bytes):
        self.server = server
        self.rid = rid
        self.argv = argv
        self.cwd = cwd
        self.max_bytes = max_bytes
        self.tag = secrets.token_hex(12)
        self.sent = {"stdout": 0, "stderr": 0}
        self.total = {"stdout": 0, "stderr": 0}
        self.truncated = False
        self.cancelled = False
        self.proc = None

    def start(self):
        env = dict(os.environ)
        env.pop(IDLE_EXIT_ENV, None)
        env[RUN_TAG_ENV] = self.tag
        try:
            self.proc = subprocess.Popen(
                self.argv, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                close_fds=True)
        except OSError as exc:
            code = _ERRNO_CODES.get(exc.errno, "io_error")
            raise GuestError(code, "cannot start %s in %s: %s"
                             % (self.argv[0], self.cwd, exc.strerror or exc))
        threading.Thread(target=self.pump, daemon=True).start()

    def forward(self, stream, data):
        self.total[stream] += len(data)
        room = self.max_bytes - self.sent[stream]
        if len(data) > room:
            self.truncated = True
            data = data[:max(room, 0)]
        if data:
            self.sent[stream] += len(data)
            self.server.send({"v": PROTOCOL_VERSION, "id": self.rid, "stream": stream,
                              "data": base64.b64encode(data).decode("ascii")})

    def read_once(self, fd, names, sel):
        """Forward what one pipe holds now; False at its end."""
        try:
            data = os.read(fd, RUN_CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            sel.unregister(fd)
            del names[fd]
            return False
        self.forward(names[fd], data)
        return True

    def pump(self):
        names = {self.proc.stdout.fileno(): "stdout", self.proc.stderr.fileno(): "stderr"}
        sel = selectors.DefaultSelector()
        for fd in names:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        try:
            while names:
                for key, _ in sel.select(RUN_POLL):
                    self.read_once(key.fd, names, sel)
                if self.proc.poll() is not None:
                    # The leader is gone: take what its pipes already hold, then stop. A child
                    # left running with the pipes open is not waited for (as with a managed
                    # process, whose run ends when its leader exits).
                    self.drain(names, sel)
                    break
        finally:
            sel.close()
            self.proc.stdout.close()
            self.proc.stderr.close()
        self.finish()

    def drain(self, names, sel):
        budget = RUN_DRAIN_LIMIT
        for fd in list(names):
            while fd in names and budget > 0:
                before = self.total[names[fd]]
                if not self.read_once(fd, names, sel):
                    break
                moved = self.total[names[fd]] - before
                if moved == 0:
                    break
                budget -= moved

    def finish(self):
        code = self.proc.wait()
        if self.cancelled:
            self.kill_tree(signal.SIGKILL, rounds=50)
        result = {
            "exit_code": code if code >= 0 else None,
            "signal": signal_name(-code) if code < 0 else None,
            "truncated": self.truncated,
            "bytes": dict(self.total),
            "cancelled": self.cancelled,
        }
        self.server.end_run(self.rid, {"v": PROTOCOL_VERSION, "id": self.rid, "result": result})

    def members(self):
        found = tree_members(self.proc.pid, self.tag)
        if found is None:  # no /proc: the process group is all that can be reached
            return None
        return found

    def kill_tree(self, sig, rounds=1):
        for _ in range(rounds):
            try:
                os.killpg(self.proc.pid, sig)
            except OSError:
                pass
            members = self.members()
            if not members:
                return
            for pid in members:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            if rounds > 1:
                time.sleep(0.02)

    def cancel(self, grace):
        if self.cancelled:
            return
        self.cancelled = True
        threading.Thread(target=self.stop, args=(grace,), daemon=True).start()

    def stop(self, grace):
        self.kill_tree(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.proc.poll() is not None and not self.members():
                break
            time.sleep(0.02)
        self.kill_tree(signal.SIGKILL, rounds=50)


class Server:
    def __init__(self, out):
        self.out = out
        self.write_lock = threading.Lock()
        self.lock = threading.Lock()
        self.runs = {}
        self.files = queue.Queue()
        self.file_busy = False
        self.last_activity = time.monotonic()
        try:
            self.idle_exit = float(os.environ.get(IDLE_EXIT_ENV, DEFAULT_IDLE_EXIT))
        except ValueError:
            self.idle_exit = DEFAULT_IDLE_EXIT

    def send(self, message):
        data = json.dumps(sanitize(message), ensure_ascii=False).encode("utf-8") + b"\n"
        with self.write_lock:
            try:
                self.out.write(data)
                self.out.flush()
            except OSError:
                os._exit(1)  # nobody can hear us any more

    def touch(self):
        with self.lock:
            self.last_activity = time.monotonic()

    def fail(self, rid, error):
        self.send({"v": PROTOCOL_VERSION, "id": rid, "error": error.to_json()})

    def dispatch(self, line):
        self.touch()
        try:
            rid, request = parse_serve_request(line)
        except ServeError as exc:
            self.fail(exc.rid, exc.error)
            return
        if request.op == "exec":
            self.start_run(rid, request)
        elif request.op == "cancel":
            self.cancel(rid, request)
        elif request.op == "ping":
            with self.lock:
                running = len(self.runs)
            self.send({"v": PROTOCOL_VERSION, "id": rid,
                       "result": {"pid": os.getpid(), "runs": running}})
        else:
            self.files.put((rid, request))

    def start_run(self, rid, request):
        try:
            a = take_args("exec", request.args, {
                "argv": Arg("str_list", required=True),
                "cwd": path_arg(required=False),
                "max_bytes": Arg("int", default=RUN_DEFAULT_MAX, minimum=0, maximum=RUN_MAX_BYTES),
            })
            if not a["argv"]:
                raise bad_args("exec", "'argv' must name a program")
            cwd = request.resolve(a["cwd"]) if a["cwd"] else request.cwd
            run = Run(self, rid, a["argv"], cwd, a["max_bytes"])
            with self.lock:
                if rid in self.runs:
                    raise bad_args("exec", "id %d is already running" % rid)
                self.runs[rid] = run
            try:
                run.start()
            except GuestError:
                with self.lock:
                    self.runs.pop(rid, None)
                raise
        except GuestError as exc:
            self.fail(rid, exc)

    def end_run(self, rid, answer):
        self.send(answer)
        with self.lock:
            self.runs.pop(rid, None)
            self.last_activity = time.monotonic()

    def cancel(self, rid, request):
        try:
            a = take_args("cancel", request.args, {
                "target": Arg("int", required=True, minimum=0),
                "grace_ms": Arg("int", default=1000, minimum=0, maximum=MAX_GRACE_MS),
            })
        except GuestError as exc:
            self.fail(rid, exc)
            return
        with self.lock:
            run = self.runs.get(a["target"])
        if run is not None:
            run.cancel(a["grace_ms"] / 1000.0)
        self.send({"v": PROTOCOL_VERSION, "id": rid, "result": {"found": run is not None}})

    def file_worker(self):
        while True:
            rid, request = self.files.get()
            with self.lock:
                self.file_busy = True
            answer = answer_of(lambda: OPERATIONS[request.op](request))
            answer["id"] = rid
            self.send(answer)
            with self.lock:
                self.file_busy = False
                self.last_activity = time.monotonic()

    def watchdog(self):
        while True:
            time.sleep(min(5.0, max(self.idle_exit / 4, 0.05)))
            with self.lock:
                idle = (not self.runs and not self.file_busy and self.files.empty()
                        and time.monotonic() - self.last_activity >= self.idle_exit)
            if idle:
                self.send({"v": PROTOCOL_VERSION, "bye": "idle"})
                os._exit(0)

    def shutdown(self):
        with self.lock:
            runs = list(self.runs.values())
        for run in runs:
            run.cancel(0)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self.lock:
                if not self.runs:
                    break
            time.sleep(0.02)
        self.send({"v": PROTOCOL_VERSION, "bye": "stdin closed"})


def serve(stdin, stdout):
    server = Server(stdout)
    server.send({"v": PROTOCOL_VERSION, "ready": {"pid": os.getpid(),
                                                   "python": platform.python_version()}})
    threading.Thread(target=server.file_worker, daemon=True).start()
    threading.Thread(target=server.watchdog, daemon=True).start()
    while True:
        line = stdin.readline()
        if not line:
            break
        if line.strip():
            server.dispatch(line)
    server.shutdown()
    return 0


def write_answer(answer):
    encoded = json.dumps(sanitize(answer), ensure_ascii=False).encode("utf-8")
    try:
        sys.stdout.buffer.write(encoded + b"\n")
        sys.stdout.buffer.flush()
    except OSError:
        return 1
    return 0


def main(argv=None):
    """`cos_guest.py` (one request on stdin), `cos_guest.py once <base64 request>` (the
    request in argv; stdin is not read) or `cos_guest.py serve` (resident mode)."""
    argv = [] if argv is None else list(argv)
    if argv[:1] == ["serve"]:
        return serve(sys.stdin.buffer, sys.stdout.buffer)
    if argv[:1] == ["once"] and len(argv) == 2:
        try:
            raw = base64.b64decode(argv[1].encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            return write_answer({"v": PROTOCOL_VERSION, "error": GuestError(
                "bad_request", "the argv request is not base64").to_json()})
        return write_answer(answer_for(raw))
    if argv:
        sys.stderr.write("cos-guest: unknown mode %r (known: serve, once)\n" % argv[0])
        return 2
    return write_answer(answer_for(sys.stdin.buffer.read()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
