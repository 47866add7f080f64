"""Reading one input file without trusting it: only regular files, never more than a cap.

Why this exists: ``st_size`` is 0 for ``/dev/zero`` (a size check alone lets it be read until
memory runs out), opening a FIFO for reading blocks until a writer appears, and a path's kind
can change between ``stat`` and ``open``. So the kind is checked before opening, the open is
non-blocking, the kind is checked again on the open descriptor, and at most ``limit + 1``
bytes are ever read whatever ``st_size`` says.
"""

from __future__ import annotations

import errno
import os
import stat

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symlink",
}
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_CHUNK = 1 << 20


class ReadError(Exception):
    """One line saying why a file cannot be read (the caller names the file)."""


class TooLarge(ReadError):
    def __init__(self, size: int | None, limit: int):
        self.size, self.limit = size, limit
        cap = f"{limit // 1048576} MB" if limit % 1048576 == 0 else f"{limit:,}-byte"
        if size is None:  # grew while read, or a size the file system does not tell
            super().__init__(f"file is larger than the {cap} limit")
        else:
            super().__init__(f"file is {size / 1048576:.1f} MB, larger than the {cap} limit")


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a file")


def describe_os_error(exc: OSError, path: str | None = None) -> str:
    """A short, exact reason for an OSError: a symlink loop is not "no such file"."""
    code = exc.errno
    if code == errno.ELOOP:
        return "symlink loop (too many levels of symbolic links)"
    if code == errno.ENOENT:
        if path is not None and os.path.islink(path):
            return "broken symlink: its target does not exist"
        return "no such file or directory"
    if code in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if code == errno.ENOTDIR:
        return "a part of the path is not a folder"
    if code == errno.ENAMETOOLONG:
        return "file name too long"
    return (exc.strerror or str(exc) or type(exc).__name__).lower()


def stat_path(path: str) -> os.stat_result:
    """``os.stat`` (following symlinks) with a :class:`ReadError` naming the exact cause."""
    try:
        return os.stat(path)
    except OSError as exc:
        raise ReadError(describe_os_error(exc, path)) from None
    except ValueError:  # embedded NUL byte
        raise ReadError("invalid file name") from None


def regular_file_problem(path: str) -> str | None:
    """Why ``path`` is not a regular file that can be handed to a reader (``None`` when it is):
    for inputs read elsewhere (DuckDB), checked before anything opens them, so a FIFO or a
    device is refused instead of blocking or reading forever."""
    try:
        st = stat_path(path)
    except ReadError as exc:
        return str(exc)
    if not stat.S_ISREG(st.st_mode):
        return f"not a regular file ({kind_of(st.st_mode)})"
    return None


def read_text(path: str, limit: int) -> str:
    """A small UTF-8 text input (a workload, a report): :func:`read_regular` then decode;
    :class:`ReadError` says why not."""
    data = read_regular(path, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ReadError("not a UTF-8 text file") from None


def read_regular(path: str, limit: int, *, head: bool = False) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; with ``head``,
    its first ``limit`` bytes whatever its size."""
    st = stat_path(path)
    if not stat.S_ISREG(st.st_mode):
        raise ReadError(f"not a regular file ({kind_of(st.st_mode)})")
    if head:
        limit, st_size = limit - 1, 0  # read limit bytes, never complain
    else:
        st_size = st.st_size
    if st_size > limit:
        raise TooLarge(st.st_size, limit)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise ReadError(describe_os_error(exc, path)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped for something else since the check
            raise ReadError(f"not a regular file ({kind_of(st.st_mode)})")
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            except OSError as exc:
                raise ReadError(describe_os_error(exc, path)) from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if head:
        return data
    if total > limit:
        raise TooLarge(None, limit)
    return data


#: How ``lint -`` and the error lines name standard input.
STDIN_NAME = "<stdin>"


def read_stdin(limit: int, fd: int = 0) -> bytes:
    """Standard input, at most ``limit`` bytes (a pipe is read until its writer closes it).

    A terminal is refused instead of waiting for someone to type (``lint -`` in an interactive
    shell with nothing piped in), and at most ``limit + 1`` bytes are ever read, so ``< /dev/zero``
    or an endless producer is one error line, not a process that fills memory."""
    try:
        if os.isatty(fd):
            raise ReadError("standard input is a terminal: pipe a template or manifests into `lint -`")
        st = os.fstat(fd)
    except OSError as exc:
        raise ReadError(describe_os_error(exc)) from None
    if stat.S_ISDIR(st.st_mode):
        raise ReadError("not a regular file (a folder)")
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        except BlockingIOError:  # a non-blocking descriptor with nothing yet: wait for it
            import select

            select.select([fd], [], [])
            continue
        except OSError as exc:
            raise ReadError(describe_os_error(exc)) from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise TooLarge(None, limit)
    return b"".join(chunks)
