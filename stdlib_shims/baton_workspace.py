"""baton's virtual `/mnt/data`, part of the runtime (`baton_runtime`
installs it): a file system held in the child's memory.

The files the request named, and what the code makes of them. Files are
nodes (contents, mode, times) that names link to and descriptors hold, as
on a disk: a file removed while open stays readable and writable through
its descriptor, a rename moves the node, directories exist on their own (an
emptied one stays). The `os` calls on paths and descriptors (`open`,
`read`, `write`, `lseek`, `fstat`, `stat`, `scandir`, `mkdir`, `rename`,
`remove`, `rmdir`, `chmod`, `utime`, `truncate`, `statvfs`, `chdir`...) and
what is built on them (`open`, pathlib, shutil, tempfile, zipfile, tarfile,
glob, csv) work there; every other path is refused.

Invariants:
- Times come from the execution's virtual clock (`_baton.clock`), so the
  workspace is a pure function of the request's files and the code, and a
  replay rebuilds it exactly.
- What the code created, changed or removed is reported to the host when
  it completes (`_WS.finish`), never before.
- Names follow the server's one rule (`_baton.name_error`).
"""

import sys
import os
import io
import posixpath
import builtins
import math
import weakref

import _baton


def _now_ns():
    """The virtual wall clock, in integer nanoseconds: times are stored as a
    file system stores them, so `st_mtime_ns` round-trips exactly through
    `os.utime(ns=...)` (as `shutil.copy2` relies on)."""
    return int(_baton.clock(0) * 1_000_000_000)


MOUNT = "/mnt/data"
#: The directories above the mount, each with its one entry: the workspace
#: looks like a file system from the top.
ANCESTORS = {"/": "mnt", "/mnt": "data"}
#: The first virtual descriptor: far above the process's own (0-2 and the
#: socket to the server), so the two never meet.
FIRST_FD = 100
BLOCK = 4096
_UMASK = 0o022
_O_TMPFILE = getattr(os, "O_TMPFILE", 0o20200000)
_O_ACCMODE = 3


def _oserror(errno_, path, text=None):
    """The OSError subclass CPython raises for `errno_`, with its text."""
    return OSError(errno_, text or os.strerror(errno_), path)


class _Node:
    """A file or directory: what names link to and descriptors hold. A
    sealed file (uploaded read-only) can be read, renamed and removed, as a
    read-only file in a writable directory can, never written."""

    __slots__ = ("data", "mode", "mtime", "atime", "ino", "links", "opens", "sealed")

    def __init__(self, mode, now, ino, data=b""):
        self.data = bytearray(data)
        self.mode, self.mtime, self.atime, self.ino = mode, now, now, ino
        self.links, self.opens = 1, 0
        self.sealed = False

    def is_dir(self):
        return self.mode & 0o170000 == 0o040000


class _Descriptor:
    """An open file description: a node, where it was opened, how, and the
    offset."""

    __slots__ = ("node", "rel", "flags", "pos")

    def __init__(self, node, rel, flags):
        self.node, self.rel, self.flags, self.pos = node, rel, flags, 0

    def readable(self):
        return self.flags & _O_ACCMODE in (os.O_RDONLY, os.O_RDWR)

    def writable(self):
        return self.flags & _O_ACCMODE in (os.O_WRONLY, os.O_RDWR)


class _Workspace:
    def __init__(self):
        # Before a program: empty, and nothing can be written.
        self.reset((), 0, 0)

    def reset(self, pairs, max_bytes, max_files, read_only=(), directories=()):
        self.max_bytes, self.max_files = max_bytes, max_files
        self.inodes = 1
        self.fds = {}
        self.next_fd = FIRST_FD
        self.cwd = ""
        self.open_objects = []
        pairs = [(name, bytes(data)) for name, data in pairs]
        # Uploaded files were there before the code started: one clock read.
        now = _now_ns() if pairs else 0
        self.nodes = {"": self._new(0o040755, now)}
        for name in sorted(directories):
            self._make_directories(name, now, itself=True)
        for name, data in sorted(pairs):
            self._make_directories(name, now, itself=False)
            self.nodes[name] = self._new(0o100644, now, data)
        self.read_only = frozenset(read_only)
        self._seal(self.read_only)
        self.used = sum(len(data) for _, data in pairs)
        self.initial = dict(pairs)

    def lay(self, pairs, read_only=(), directories=()):
        """A session's later cell: its request's files (and directories)
        laid over the workspace the earlier cells left (a directory of a
        file's name stays); what the cell changes is counted from here
        (`finish`)."""
        pairs = [(name, bytes(data)) for name, data in pairs]
        now = _now_ns() if pairs or directories else 0
        for name in sorted(directories):
            self._make_directories(name, now, itself=True)
        for name, data in sorted(pairs):
            self._make_directories(name, now, itself=False)
            old = self.nodes.get(name)
            if old is not None and old.is_dir():
                continue
            if old is not None:
                self.used -= len(old.data)
            self.nodes[name] = self._new(0o100644, now, data)
            self.used += len(data)
        self.read_only = self.read_only | frozenset(read_only)
        self._seal(read_only)
        self.initial = {name: bytes(node.data) for name, node in self.nodes.items()
                        if name and name not in ANCESTORS and not node.is_dir()}

    def _make_directories(self, name, now, itself):
        """The directories `name` lies in (and `name` itself, when
        `itself`), made where missing."""
        parts = name.split("/")
        for i in range(1, len(parts) + (1 if itself else 0)):
            self.nodes.setdefault("/".join(parts[:i]), self._new(0o040755, now))

    def _seal(self, names):
        """Makes the files of `names` read-only (uploaded `read_only`)."""
        for name in names:
            node = self.nodes.get(name)
            if node is not None and not node.is_dir():
                node.mode, node.sealed = 0o100444, True

    def _new(self, mode, now, data=b""):
        self.inodes += 1
        return _Node(mode, now, self.inodes, data)

    # -- names

    def resolve(self, path, dir_fd=None, creating=False):
        """The name under /mnt/data of `path` ("" for the mount itself, or
        one of `ANCESTORS` for `/` and `/mnt`). A name the rule refuses
        cannot exist: looking one up finds nothing (`ENOENT`, as a missing
        file answers); only making one (`creating`) says why it is
        refused."""
        if isinstance(path, int):
            raise OSError(9, "Bad file descriptor")
        path = os.fspath(path)
        if isinstance(path, bytes):
            path = path.decode("utf-8", "surrogateescape")
        if "\0" in path:
            raise ValueError("embedded null byte")
        if path == "":
            raise FileNotFoundError(2, "No such file or directory", path)
        base = MOUNT + "/" + self.cwd if self.cwd else MOUNT
        if dir_fd is not None and not path.startswith("/"):
            base = self.path_of(self.descriptor(dir_fd).rel)
        full = posixpath.normpath(posixpath.join(base, path))
        if full == MOUNT:
            return ""
        if full in ANCESTORS:
            return full
        if not full.startswith(MOUNT + "/"):
            raise PermissionError(13, "Permission denied: only %s is available" % MOUNT, path)
        rel = full[len(MOUNT) + 1:]
        refused = _baton.name_error(rel)
        if refused is not None:
            if creating:
                raise OSError(refused[0], refused[1], path)
            raise FileNotFoundError(2, "No such file or directory", path)
        return rel

    @staticmethod
    def path_of(rel):
        if rel in ANCESTORS:
            return rel
        return MOUNT + "/" + rel if rel else MOUNT

    def node(self, rel, path):
        """The node at `rel`, or FileNotFoundError (NotADirectoryError when
        a parent is a file)."""
        if rel in ANCESTORS:
            return None
        found = self.nodes.get(rel)
        if found is None:
            self.parent(rel, path)
            raise FileNotFoundError(2, "No such file or directory", path)
        return found

    def parent(self, rel, path):
        """Checks that the parent of `rel` is a directory."""
        if rel == "" or rel in ANCESTORS:
            return
        parent = posixpath.dirname(rel)
        found = self.nodes.get(parent)
        if found is None:
            raise FileNotFoundError(2, "No such file or directory", path)
        if not found.is_dir():
            raise NotADirectoryError(20, "Not a directory", path)

    def is_file(self, path):
        """Whether `path` names a file of the workspace (never raises)."""
        try:
            rel = self.resolve(path)
        except (OSError, ValueError):
            return False
        found = None if rel in ANCESTORS else self.nodes.get(rel)
        return found is not None and not found.is_dir()

    def is_dir(self, rel):
        if rel in ANCESTORS:
            return True
        found = self.nodes.get(rel)
        return found is not None and found.is_dir()

    def children(self, rel, path):
        if rel in ANCESTORS:
            return [ANCESTORS[rel]]
        found = self.node(rel, path)
        if not found.is_dir():
            raise NotADirectoryError(20, "Not a directory", path)
        prefix = rel + "/" if rel else ""
        return [name[len(prefix):] for name in self.nodes
                if name.startswith(prefix) and name != "" and "/" not in name[len(prefix):]]

    # -- sizes

    def grow(self, node, new_size):
        """Accounts a node's change of size, refusing what would overflow."""
        growth = new_size - len(node.data)
        if growth > 0 and self.used + growth > self.max_bytes:
            raise OSError(28, "No space left on device: the workspace is full")
        self.used += growth

    def link(self, rel, node):
        old = self.nodes.get(rel)
        if old is None and not node.is_dir() and self.file_count() >= self.max_files:
            raise OSError(28, "No space left on device: the workspace has its most files")
        self.nodes[rel] = node
        if old is not None and old is not node:
            self.unlink_node(old)

    def unlink_node(self, node):
        node.links -= 1
        if node.links <= 0 and node.opens <= 0:
            self.used -= len(node.data)

    def file_count(self):
        return sum(1 for n in self.nodes.values() if not n.is_dir())

    # -- descriptors

    def descriptor(self, fd):
        try:
            return self.fds[fd]
        except (KeyError, TypeError):
            if not isinstance(fd, int):
                raise TypeError("an integer is required (got type %s)" % type(fd).__name__) from None
            raise OSError(9, "Bad file descriptor") from None

    def allocate(self, node, rel, flags):
        fd = self.next_fd
        while fd in self.fds:
            fd += 1
        self.next_fd = fd + 1
        if node is not None:
            node.opens += 1
        self.fds[fd] = _Descriptor(node, rel, flags)
        return fd

    def release(self, fd):
        desc = self.fds.pop(fd, None)
        if desc is None:
            raise OSError(9, "Bad file descriptor")
        self.next_fd = min(self.next_fd, fd)
        node = desc.node
        if node is not None:
            node.opens -= 1
            if node.links <= 0 and node.opens <= 0:
                self.used -= len(node.data)

    def keep(self, obj):
        """Remembers a file object, to flush it when the program ends if it
        is still open then (weakly: a file the program drops is closed, and
        so flushed, as CPython closes it)."""
        if len(self.open_objects) >= 64:
            self.open_objects = [r for r in self.open_objects if r() is not None and not r().closed]
        self.open_objects.append(weakref.ref(obj))

    # -- the end

    def finish(self):
        """Flushes files left open and reports what changed."""
        for ref in list(self.open_objects):
            f = ref()
            try:
                if f is not None and not f.closed:
                    f.flush()
            except Exception:
                pass
        for name in sorted(self.nodes):
            node = self.nodes[name]
            if node.is_dir() or name in self.read_only:
                continue
            data = bytes(node.data)
            if self.initial.get(name) != data:
                _baton.produced(name, data)
        for name in sorted(self.initial):
            found = self.nodes.get(name)
            if (found is None or found.is_dir()) and name not in self.read_only:
                _baton.removed(name)
        for name in sorted(self.nodes):
            if name and name not in ANCESTORS and self.nodes[name].is_dir():
                if not self.children(name, name):
                    _baton.directory(name)


_WS = _Workspace()


def _stat_of(node, rel):
    if node is None:  # `/` and `/mnt`
        node = _Node(0o040755, 0, 2 if rel == "/" else 3)
    size = BLOCK if node.is_dir() else len(node.data)
    nlink = 2 if node.is_dir() else max(node.links, 0)
    nanos = (node.atime, node.mtime, node.mtime)
    ints = tuple(ns // 1_000_000_000 for ns in nanos)
    # As CPython makes them from a timespec: seconds plus nanoseconds.
    floats = tuple(ns // 1_000_000_000 + (ns % 1_000_000_000) * 1e-9 for ns in nanos)
    return os.stat_result((node.mode, node.ino, 0x62, nlink, 0, 0, size) + ints + floats + nanos)


# -- descriptors


def _os_open(path, flags, mode=0o777, *, dir_fd=None):
    rel = _WS.resolve(path, dir_fd, creating=bool(flags & os.O_CREAT))
    if flags & _O_TMPFILE == _O_TMPFILE:
        raise OSError(95, "Operation not supported", path)
    access = flags & _O_ACCMODE
    found = None if rel in ANCESTORS else _WS.nodes.get(rel)
    if rel in ANCESTORS or (found is not None and found.is_dir()):
        if flags & os.O_CREAT and flags & os.O_EXCL:
            raise FileExistsError(17, "File exists", path)
        if access != os.O_RDONLY or flags & os.O_CREAT:
            raise IsADirectoryError(21, "Is a directory", path)
        return _WS.allocate(found, rel, flags)
    if flags & os.O_DIRECTORY:
        if found is None:
            _WS.node(rel, path)
        raise NotADirectoryError(20, "Not a directory", path)
    if found is not None:
        if flags & os.O_CREAT and flags & os.O_EXCL:
            raise FileExistsError(17, "File exists", path)
        if found.sealed and (access != os.O_RDONLY or flags & os.O_TRUNC):
            raise PermissionError(13, "Permission denied", path)
    else:
        if not flags & os.O_CREAT:
            _WS.node(rel, path)
        _WS.parent(rel, path)
        found = _WS._new(0o100000 | (mode & 0o7777 & ~_UMASK), _now_ns())
        _WS.link(rel, found)
    if flags & os.O_TRUNC and access != os.O_RDONLY and found.data:
        _WS.grow(found, 0)
        del found.data[:]
        found.mtime = _now_ns()
    return _WS.allocate(found, rel, flags)


def _os_close(fd):
    _WS.release(fd)


def _file_descriptor(fd):
    desc = _WS.descriptor(fd)
    if desc.node is None or desc.node.is_dir():
        raise IsADirectoryError(21, "Is a directory")
    return desc


def _os_read(fd, n):
    if fd == 0:
        return b""
    desc = _file_descriptor(fd)
    if not desc.readable():
        raise OSError(9, "Bad file descriptor")
    if n < 0:
        raise ValueError("negative count")
    data = bytes(desc.node.data[desc.pos:desc.pos + n])
    desc.pos += len(data)
    return data


def _os_write(fd, data):
    data = memoryview(data).cast("B")
    if fd in (1, 2):
        (sys.stdout if fd == 1 else sys.stderr).write(bytes(data).decode("utf-8", "replace"))
        return len(data)
    desc = _file_descriptor(fd)
    if not desc.writable():
        raise OSError(9, "Bad file descriptor")
    node = desc.node
    if desc.flags & os.O_APPEND:
        desc.pos = len(node.data)
    end = desc.pos + len(data)
    if end > len(node.data):
        _WS.grow(node, end)
        node.data.extend(bytes(end - len(node.data)))
    node.data[desc.pos:end] = data
    desc.pos = end
    node.mtime = _now_ns()
    return len(data)


def _os_lseek(fd, pos, how):
    desc = _WS.descriptor(fd)
    size = 0 if desc.node is None or desc.node.is_dir() else len(desc.node.data)
    base = {os.SEEK_SET: 0, os.SEEK_CUR: desc.pos, os.SEEK_END: size}.get(how)
    if base is None or base + pos < 0:
        raise OSError(22, "Invalid argument")
    desc.pos = base + pos
    return desc.pos


def _os_ftruncate(fd, length):
    desc = _file_descriptor(fd)
    if not desc.writable():
        raise OSError(22, "Invalid argument")
    _truncate(desc.node, length)


def _truncate(node, length):
    if length < 0:
        raise OSError(22, "Invalid argument")
    _WS.grow(node, length)
    if length < len(node.data):
        del node.data[length:]
    else:
        node.data.extend(bytes(length - len(node.data)))
    node.mtime = _now_ns()


def _os_fstat(fd):
    if fd in (0, 1, 2):
        return os.stat_result((0o020620, fd + 1, 0x5, 1, 0, 0, 0, 0, 0, 0))
    desc = _WS.descriptor(fd)
    return _stat_of(desc.node, desc.rel)


def _os_fsync(fd):
    _WS.descriptor(fd)


def _os_isatty(fd):
    return False


class _FileIO(io.RawIOBase):
    """The raw file `open` builds on a workspace descriptor."""

    def __init__(self, fd, name, mode, closefd=True):
        super().__init__()
        self._fd, self.name, self.mode, self.closefd = fd, name, mode, closefd
        desc = _WS.descriptor(fd)
        self._readable, self._writable = desc.readable(), desc.writable()

    def fileno(self):
        self._checkClosed()
        return self._fd

    def readable(self):
        self._checkClosed()
        return self._readable

    def writable(self):
        self._checkClosed()
        return self._writable

    def seekable(self):
        self._checkClosed()
        return True

    def isatty(self):
        self._checkClosed()
        return False

    def readinto(self, buffer):
        self._checkClosed()
        if not self._readable:
            raise io.UnsupportedOperation("File not open for reading")
        view = memoryview(buffer).cast("B")
        data = _os_read(self._fd, len(view))
        view[:len(data)] = data
        return len(data)

    def readall(self):
        self._checkClosed()
        if not self._readable:
            raise io.UnsupportedOperation("File not open for reading")
        desc = _WS.descriptor(self._fd)
        return _os_read(self._fd, max(len(desc.node.data) - desc.pos, 0))

    def write(self, data):
        self._checkClosed()
        if not self._writable:
            raise io.UnsupportedOperation("File not open for writing")
        return _os_write(self._fd, data)

    def seek(self, pos, whence=0):
        self._checkClosed()
        return _os_lseek(self._fd, pos, whence)

    def tell(self):
        self._checkClosed()
        return _os_lseek(self._fd, 0, os.SEEK_CUR)

    def truncate(self, size=None):
        self._checkClosed()
        if not self._writable:
            raise io.UnsupportedOperation("File not open for writing")
        size = self.tell() if size is None else size
        _os_ftruncate(self._fd, size)
        return size

    def close(self):
        if not self.closed:
            try:
                super().close()
            finally:
                if self.closefd:
                    _os_close(self._fd)

    def __repr__(self):
        return "<_io.FileIO name=%r mode=%r closefd=%r>" % (self.name, self.mode, self.closefd)


_MODE_FLAGS = {
    "r": os.O_RDONLY,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
}


def _open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True, opener=None):
    if not isinstance(mode, str) or not set(mode) <= set("rwaxbt+") or sum(mode.count(c) for c in "rwax") != 1 \
            or len(set(mode)) != len(mode) or ("b" in mode and "t" in mode):
        raise ValueError("invalid mode: %r" % (mode,))
    binary = "b" in mode
    if binary and (encoding is not None or errors is not None or newline is not None):
        raise ValueError("binary mode doesn't take an encoding, errors or newline argument")
    if not binary and buffering == 0:
        raise ValueError("can't have unbuffered text I/O")
    kind = next(c for c in mode if c in "rwax")
    flags = _MODE_FLAGS[kind]
    if "+" in mode:
        flags = (flags & ~_O_ACCMODE) | os.O_RDWR
    if isinstance(file, bool) or not isinstance(file, (int, str, bytes)) and not hasattr(file, "__fspath__"):
        raise TypeError("expected str, bytes or os.PathLike object, not %s" % type(file).__name__)
    if isinstance(file, int):
        if file in (0, 1, 2):
            raise PermissionError(1, "the standard streams are sys.stdin, sys.stdout and sys.stderr in baton")
        fd = file
        _WS.descriptor(fd)
    elif opener is not None:
        fd = opener(file, flags | os.O_CLOEXEC)
    else:
        fd = _os_open(file, flags | os.O_CLOEXEC, 0o666)
    desc = _WS.descriptor(fd)
    if desc.node is None or desc.node.is_dir():
        if closefd:
            _os_close(fd)
        raise IsADirectoryError(21, "Is a directory", file)
    rawmode = {"r": "rb", "w": "wb", "x": "xb", "a": "ab"}[kind] if "+" not in mode else \
        {"r": "rb+", "w": "rb+", "x": "xb+", "a": "ab+"}[kind]
    raw = _FileIO(fd, file, rawmode, closefd)
    if kind == "a":
        raw.seek(0, os.SEEK_END)
    if buffering == 0:
        _WS.keep(raw)
        return raw
    line_buffering = buffering == 1
    size = buffering if buffering > 1 else io.DEFAULT_BUFFER_SIZE
    if "+" in mode:
        buffered = io.BufferedRandom(raw, size)
    elif kind == "r":
        buffered = io.BufferedReader(raw, size)
    else:
        buffered = io.BufferedWriter(raw, size)
    if binary:
        _WS.keep(buffered)
        return buffered
    text = io.TextIOWrapper(buffered, encoding or "utf-8", errors, newline, line_buffering)
    text.mode = mode
    _WS.keep(text)
    return text


# -- paths


def _os_stat(path, *, dir_fd=None, follow_symlinks=True):
    if isinstance(path, int):
        return _os_fstat(path)
    rel = _WS.resolve(path, dir_fd)
    return _stat_of(_WS.node(rel, path), rel)


def _os_lstat(path, *, dir_fd=None):
    return _os_stat(path, dir_fd=dir_fd)


def _os_listdir(path="."):
    if isinstance(path, int):
        desc = _WS.descriptor(path)
        return _WS.children(desc.rel, path)
    names = _WS.children(_WS.resolve(path), path)
    return [os.fsencode(n) for n in names] if isinstance(path, bytes) else names


class _DirEntry:
    def __init__(self, directory, name):
        self.name = name
        self.path = posixpath.join(directory, name)

    def _node(self):
        try:
            return _WS.nodes.get(_WS.resolve(self.path))
        except OSError:
            return None

    def is_file(self, *, follow_symlinks=True):
        found = self._node()
        return found is not None and not found.is_dir()

    def is_dir(self, *, follow_symlinks=True):
        return _WS.is_dir(_WS.resolve(self.path))

    def is_symlink(self):
        return False

    def is_junction(self):
        return False

    def inode(self):
        return self.stat().st_ino

    def stat(self, *, follow_symlinks=True):
        return _os_stat(self.path)

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return "<DirEntry %r>" % self.name


class _Scandir:
    def __init__(self, path):
        self._entries = iter([_DirEntry(path, n) for n in _os_listdir(path)])

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._entries)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass


def _os_scandir(path="."):
    if isinstance(path, int):
        return _Scandir(_WS.path_of(_WS.descriptor(path).rel))
    return _Scandir(os.fspath(path))


def _os_mkdir(path, mode=0o777, *, dir_fd=None):
    rel = _WS.resolve(path, dir_fd, creating=True)
    if rel in ANCESTORS or rel in _WS.nodes:
        raise FileExistsError(17, "File exists", path)
    _WS.parent(rel, path)
    _WS.link(rel, _WS._new(0o040000 | (mode & 0o7777 & ~_UMASK), _now_ns()))


def _os_remove(path, *, dir_fd=None):
    rel = _WS.resolve(path, dir_fd)
    if rel in ANCESTORS:
        raise PermissionError(13, "Permission denied", path)
    found = _WS.node(rel, path)
    if found.is_dir():
        raise IsADirectoryError(21, "Is a directory", path)
    del _WS.nodes[rel]
    _WS.unlink_node(found)


def _os_rmdir(path, *, dir_fd=None):
    rel = _WS.resolve(path, dir_fd)
    if rel == "" or rel in ANCESTORS:
        raise OSError(16, "Device or resource busy", path)
    found = _WS.node(rel, path)
    if not found.is_dir():
        raise NotADirectoryError(20, "Not a directory", path)
    if _WS.children(rel, path):
        raise OSError(39, "Directory not empty", path)
    del _WS.nodes[rel]


def _os_rename(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
    a, b = _WS.resolve(src, src_dir_fd), _WS.resolve(dst, dst_dir_fd, creating=True)
    if a in ANCESTORS or b in ANCESTORS or "" in (a, b):
        raise OSError(16, "Device or resource busy", src)
    moving = _WS.node(a, src)
    _WS.parent(b, dst)
    if a == b:
        return
    target = _WS.nodes.get(b)
    if not moving.is_dir():
        if target is not None and target.is_dir():
            raise IsADirectoryError(21, "Is a directory", dst)
        del _WS.nodes[a]
        _WS.link(b, moving)
        return
    if b.startswith(a + "/"):
        raise OSError(22, "Invalid argument", src)
    if target is not None:
        if not target.is_dir():
            raise NotADirectoryError(20, "Not a directory", dst)
        if _WS.children(b, dst):
            raise OSError(39, "Directory not empty", dst)
    prefix = a + "/"
    for name in [n for n in _WS.nodes if n == a or n.startswith(prefix)]:
        _WS.nodes[b + name[len(a):]] = _WS.nodes.pop(name)


def _os_chdir(path):
    rel = _WS.resolve(path)
    if rel in ANCESTORS:
        raise PermissionError(13, "Permission denied: only %s is available" % MOUNT, path)
    if not _WS.node(rel, path).is_dir():
        raise NotADirectoryError(20, "Not a directory", path)
    _WS.cwd = rel


def _os_getcwd():
    return _WS.path_of(_WS.cwd)


def _changeable(path, dir_fd):
    if isinstance(path, int):
        desc = _WS.descriptor(path)
        return desc.node, desc.rel
    rel = _WS.resolve(path, dir_fd)
    if rel in ANCESTORS:
        raise PermissionError(1, "Operation not permitted", path)
    return _WS.node(rel, path), rel


def _unsealed(node, path):
    """Refuses a change of a sealed file's metadata, as the kernel refuses
    it to a file's non-owner."""
    if node is not None and node.sealed:
        raise PermissionError(1, "Operation not permitted", path)


def _os_chmod(path, mode, *, dir_fd=None, follow_symlinks=True):
    node, _ = _changeable(path, dir_fd)
    _unsealed(node, path)
    node.mode = (node.mode & 0o170000) | (mode & 0o7777)


def _os_utime(path, times=None, *, ns=None, dir_fd=None, follow_symlinks=True):
    if times is not None and ns is not None:
        raise ValueError("utime: you may specify either 'times' or 'ns' but not both")
    node, _ = _changeable(path, dir_fd)
    _unsealed(node, path)
    if ns is not None:
        node.atime, node.mtime = int(ns[0]), int(ns[1])
    elif times is not None:
        node.atime, node.mtime = (math.floor(float(t) * 1_000_000_000) for t in times)
    else:
        node.atime = node.mtime = _now_ns()


def _os_truncate(path, length):
    if isinstance(path, int):
        return _os_ftruncate(path, length)
    node, _ = _changeable(path, None)
    if node.is_dir():
        raise IsADirectoryError(21, "Is a directory", path)
    if node.sealed:
        raise PermissionError(13, "Permission denied", path)
    _truncate(node, length)


def _os_access(path, mode, *, dir_fd=None, effective_ids=False, follow_symlinks=True):
    try:
        rel = _WS.resolve(path, dir_fd)
        node = _WS.node(rel, path)
    except (OSError, ValueError):
        return False
    if rel in ANCESTORS:
        return not mode & os.W_OK
    if mode & os.W_OK and node.sealed:
        return False
    if mode & os.X_OK and not node.is_dir() and not node.mode & 0o111:
        return False
    return True


def _os_statvfs(path):
    _WS.node(_WS.resolve(path), path)
    blocks = _WS.max_bytes // BLOCK
    free = max(_WS.max_bytes - _WS.used, 0) // BLOCK
    files = _WS.file_count()
    return os.statvfs_result((BLOCK, BLOCK, blocks, free, free, _WS.max_files,
                              _WS.max_files - files, _WS.max_files - files, 0, 255))


def _os_readlink(path, *, dir_fd=None):
    rel = _WS.resolve(path, dir_fd)
    _WS.node(rel, path)
    raise OSError(22, "Invalid argument", path)


def _fdopen(fd, mode="r", buffering=-1, encoding=None, *args, **kwargs):
    if not isinstance(fd, int):
        raise TypeError("invalid fd type (%s, expected integer)" % type(fd))
    return _open(fd, mode, buffering, encoding, *args, **kwargs)


def _os_umask(mask):
    global _UMASK
    old, _UMASK = _UMASK, mask & 0o777
    return old


_real_fstat = os.fstat

#: The `os` functions the workspace provides, by name.
_WORKSPACE_FUNCTIONS = {
    "open": _os_open, "close": _os_close, "read": _os_read, "write": _os_write,
    "lseek": _os_lseek, "fstat": _os_fstat, "ftruncate": _os_ftruncate,
    "fsync": _os_fsync, "fdatasync": _os_fsync, "isatty": _os_isatty,
    "stat": _os_stat, "lstat": _os_lstat, "listdir": _os_listdir,
    "scandir": _os_scandir, "mkdir": _os_mkdir, "remove": _os_remove,
    "unlink": _os_remove, "rmdir": _os_rmdir, "rename": _os_rename,
    "replace": _os_rename, "chdir": _os_chdir, "getcwd": _os_getcwd,
    "getcwdb": lambda: _os_getcwd().encode(), "chmod": _os_chmod,
    "utime": _os_utime, "truncate": _os_truncate, "access": _os_access,
    "statvfs": _os_statvfs, "readlink": _os_readlink, "umask": _os_umask,
}

#: Fast paths the standard library takes only when `os` has them (copies
#: by `sendfile`, extended attributes): absent, it takes the portable path.
_ABSENT_OS = (
    "sendfile", "copy_file_range", "splice", "listxattr", "getxattr",
    "setxattr", "removexattr", "posix_fallocate", "posix_fadvise",
)


class _ModuleFinder:
    """Imports modules kept in the workspace (code the model wrote, or a
    file it was given) from the `sys.path` entries inside it, as CPython
    imports them from a disk: `name.py`, or a package `name/__init__.py`.
    After the built-in and frozen finders on `sys.meta_path`, so the
    standard library comes first."""

    @staticmethod
    def _directory(entry):
        if entry == "":
            return _WS.path_of(_WS.cwd)
        if isinstance(entry, str) and (entry == MOUNT or entry.startswith(MOUNT + "/")):
            return entry
        return None

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        import importlib.machinery
        tail = fullname.rpartition(".")[2]
        for entry in sys.path if path is None else path:
            directory = cls._directory(entry)
            if directory is None:
                continue
            package = posixpath.join(directory, tail)
            for file, is_package in ((posixpath.join(package, "__init__.py"), True),
                                     (package + ".py", False)):
                if _WS.is_file(file):
                    spec = importlib.machinery.ModuleSpec(
                        fullname, _ModuleLoader(file), origin=file, is_package=is_package)
                    spec.has_location = True
                    if is_package:
                        spec.submodule_search_locations = [package]
                    return spec
        return None


class _ModuleLoader:
    """Runs a workspace module's source in its module."""

    def __init__(self, path):
        self.path = path

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        import linecache
        with _open(self.path, "rb") as f:
            source = f.read()
        # Tracebacks show the module's lines, as from a file on disk.
        text = source.decode("utf-8", "replace")
        linecache.cache[self.path] = (len(text), None, text.splitlines(True), self.path)
        code = builtins.compile(source, self.path, "exec", dont_inherit=True)
        exec(code, module.__dict__)


def _install_workspace():
    builtins.open = _open
    io.open = _open
    os.fdopen = _fdopen
    for name, function in _WORKSPACE_FUNCTIONS.items():
        setattr(os, name, function)
    for name in _ABSENT_OS:
        if hasattr(os, name):
            delattr(os, name)
    # What was decided at import from the real functions: descriptor-relative
    # walks would pass the workspace's descriptors to real calls.
    for name in ("supports_fd", "supports_dir_fd", "supports_follow_symlinks"):
        setattr(os, name, set())
    if hasattr(os, "fwalk"):
        del os.fwalk
    # Before the path finder, which would read the real disk at the same
    # names; after the built-in and frozen ones (the standard library).
    finders = [getattr(f, "__name__", "") for f in sys.meta_path]
    at = finders.index("PathFinder") if "PathFinder" in finders else len(sys.meta_path)
    sys.meta_path.insert(at, _ModuleFinder)
