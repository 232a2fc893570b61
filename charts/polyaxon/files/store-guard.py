# The artifacts store guard of haupt's processes in the gateway pod (the API and streams):
# no link under the store is followed. haupt reads and writes a run's files through links,
# so a run that writes `outputs/env -> /proc/self/environ` would read the process's files
# back, and an upload through a folder link would write where the link points. The chart
# puts this before each process's own program, so it runs before haupt is imported.
#
# Under the store's mount path and the archives folder (POLYAXON_AGENT_ARTIFACTS_STORE's
# mountPath, POLYAXON_ARCHIVES_ROOT), every open, for reading or writing, walks the path one
# component at a time with O_NOFOLLOW (openat), so a run cannot swap a folder for a link
# between a check and the open; a path spelt under the store that leaves it through '..' is
# refused; directory reads and stat refuse a path through a link, and listings leave links
# out. Paths elsewhere (Python's modules, certificates, the pod's own token) are untouched.
# Patched before haupt, fsspec, aiofiles and tarfile are imported: the last two keep `open`
# at import. uvicorn's workers are new processes that do not run this: one worker each.
import builtins
import errno
import io
import os
import stat

_orig_open = builtins.open  # == io.open
_orig_os_open = os.open
_orig_scandir = os.scandir
_orig_listdir = os.listdir
_orig_stat = os.stat
_orig_lstat = os.lstat
_ROOTS = ()  # normalised absolute roots (configured spelling and realpath)
_HIDE = True
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class SymlinkRefusedError(PermissionError):
    pass


def _refuse(path, why="symbolic link in path is not allowed"):
    raise SymlinkRefusedError(errno.EACCES, why, path)


def _split_under_root(path):
    """(root, [components below root]) if `path` is under a guarded root, else None."""
    if isinstance(path, int):  # an fd: nothing to resolve
        return None
    try:
        p = os.fsdecode(os.fspath(path))
    except TypeError:
        return None
    if not p.startswith("/"):
        p = os.path.join(os.getcwd(), p)
    norm = os.path.normpath(p)
    raw = [c for c in p.split("/") if c not in ("", ".")]
    for root in _ROOTS:
        # Spelt under a root, judged as spelt: "<store>/run/../../etc" normalises out of the
        # store, and haupt builds such paths from what runs write (an event's asset path).
        under = [c for c in root.split("/") if c]
        if raw[:len(under)] == under and ".." in raw[len(under):]:
            _refuse(p, "'..' not allowed under the artifacts store")
        if norm == root or norm.startswith(root + "/"):
            if ".." in raw:  # kernel would resolve ".." after links: refuse
                _refuse(p, "'..' not allowed under the artifacts store")
            return root, [c for c in norm[len(root):].split("/") if c]
    return None


def _open_dir_nofollow(root, parts, path):
    """fd of root/parts[0]/... walked with O_NOFOLLOW on every component."""
    fd = _orig_os_open(root, _DIR_FLAGS)
    try:
        for part in parts:
            try:
                nfd = _orig_os_open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:  # O_DIRECTORY|O_NOFOLLOW on a link gives ENOTDIR
                if e.errno in (errno.ENOTDIR, errno.ELOOP) and stat.S_ISLNK(
                    os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
                ):
                    _refuse(path)
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _secure_os_open(path, flags, mode=0o777, *, dir_fd=None):
    where = None if dir_fd is not None else _split_under_root(path)
    if where is None or not where[1]:
        return _orig_os_open(path, flags, mode, dir_fd=dir_fd)
    root, parts = where
    dfd = _open_dir_nofollow(root, parts[:-1], path)
    try:
        return _orig_os_open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=dfd)
    except OSError as e:  # ELOOP: the last component is a link
        if e.errno == errno.ELOOP:
            _refuse(path)
        raise
    finally:
        os.close(dfd)


def _secure_open(file, mode="r", buffering=-1, encoding=None, errors=None,
                 newline=None, closefd=True, opener=None):
    # Route guarded paths through openat/O_NOFOLLOW via `opener`; f.name stays the path.
    if opener is None and _split_under_root(file) is not None:
        opener = lambda p, fl: _secure_os_open(p, fl, 0o666)  # noqa: E731
    return _orig_open(file, mode, buffering, encoding, errors, newline, closefd, opener)


def _check_dir(path):
    """Raise if any component of guarded `path` is a link; True if guarded."""
    where = _split_under_root(path)
    if where is None:
        return False
    os.close(_open_dir_nofollow(where[0], where[1], path))
    return True


class _NoLinkScandir:
    """os.scandir iterator (context manager too) that skips symlink entries."""

    def __init__(self, it):
        self._it = it

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            entry = next(self._it)
            if not entry.is_symlink():
                return entry

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._it.close()

    def close(self):
        self._it.close()


def _secure_scandir(path="."):
    if not _check_dir(path):
        return _orig_scandir(path)
    it = _orig_scandir(path)
    return _NoLinkScandir(it) if _HIDE else it


def _secure_listdir(path="."):
    if not _check_dir(path):
        return _orig_listdir(path)
    names = _orig_listdir(path)
    if _HIDE:
        names = [n for n in names if not os.path.islink(os.path.join(path, n))]
    return names


def _secure_stat(path, *, dir_fd=None, follow_symlinks=True):
    # Metadata only (size/mtime/existence), but without this a link lets a caller
    # probe arbitrary files (tree?path=outputs/etc/shadow gives its size).  Also
    # makes os.path.exists/isfile/isdir report False for anything through a link.
    where = None if dir_fd is not None else _split_under_root(path)
    if where is not None:
        root, parts = where
        last = len(parts) if follow_symlinks else len(parts) - 1
        prefix = root
        for part in parts[:last]:  # lstat each component below the root
            prefix = prefix + "/" + part
            if stat.S_ISLNK(_orig_lstat(prefix).st_mode):
                _refuse(path)
    return _orig_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)


def _guard_parents(path):
    """Raise if a component of guarded `path` above its last is a link (or it uses '..')."""
    where = _split_under_root(path)
    if where is not None and where[1]:
        os.close(_open_dir_nofollow(where[0], where[1][:-1], path))


def _path_op(op, *paths):
    """op (os.remove, os.mkdir, ...) that refuses to work through a link under the store: it
    acts on the last component itself (removing a link removes the link, not its target)."""
    def guarded(*args, **kwargs):
        if kwargs.get("dir_fd") is None and kwargs.get("src_dir_fd") is None:
            for i in paths:
                if i < len(args):
                    _guard_parents(args[i])
        return op(*args, **kwargs)
    return guarded


def install(*roots, hide_links=True, guard_stat=True):
    """Guard `roots` (the store mount path; optionally the archives root)."""
    global _ROOTS, _HIDE
    norm = set()
    for r in roots:
        if r:
            norm.add(os.path.normpath(os.path.abspath(r)))
            norm.add(os.path.realpath(r))
    _ROOTS = tuple(sorted(norm))
    _HIDE = hide_links
    builtins.open = io.open = _secure_open
    os.open = _secure_os_open
    os.scandir = _secure_scandir  # os.walk/glob look it up as a module global
    os.listdir = _secure_listdir
    # Deletes, renames and new folders through a link (shutil.rmtree opens with os.open).
    os.remove = os.unlink = _path_op(os.remove, 0)
    os.rmdir = _path_op(os.rmdir, 0)
    os.mkdir = _path_op(os.mkdir, 0)
    os.rename = _path_op(os.rename, 0, 1)
    os.replace = _path_op(os.replace, 0, 1)
    if guard_stat:  # os.path.exists/isfile/isdir/getsize call os.stat at run time
        os.stat = _secure_stat


def install_from_env(hide_links=True, guard_stat=True):
    """Roots from POLYAXON_AGENT_ARTIFACTS_STORE (mountPath / hostPath) + archives."""
    import json

    # No agent, no store given to this process: nothing to guard.
    store = json.loads(os.environ.get("POLYAXON_AGENT_ARTIFACTS_STORE") or "{}")
    schema = store.get("schema") or {}
    root = schema.get("mountPath") or schema.get("hostPath")
    install(root, os.environ.get("POLYAXON_ARCHIVES_ROOT"),
            hide_links=hide_links, guard_stat=guard_stat)

install_from_env()
