"""What a sandboxed process may do: :class:`SandboxPolicy` and its :class:`SandboxLimits`.

Reads are deny-listed (the host file system is readable, read-only, except ``read_deny``);
writes are allow-listed (the run's workspace, plus ``write_allow``, minus ``write_deny``); the
network is off unless ``network="on"``. Paths may start with ``~`` (the home of the user running
the agent, expanded when a run starts). The defaults are safe for an untrusted skill::

    SandboxPolicy()                                   # workspace writable, no network
    SandboxPolicy(network="on")                       # a skill that downloads something
    SandboxPolicy(write_allow=("~/reports",),         # also write one host folder
                  limits=SandboxLimits(memory_bytes=4 * GIB, cpu_seconds=120))
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Literal

from plait.sandbox.errors import SandboxPolicyInvalid

__all__ = [
    "DEFAULT_READ_DENY",
    "GIB",
    "HOME_SECRETS",
    "MAX_DENY_MATCHES",
    "MIB",
    "WORKSPACE_POLL_SECONDS",
    "SandboxLimits",
    "SandboxPolicy",
]

MIB = 1024 * 1024
GIB = 1024 * MIB

WORKSPACE_POLL_SECONDS = 0.2
"""How often a running sandbox measures its workspace against ``SandboxLimits.workspace_bytes``
and ``workspace_files`` (and once more when the run exits); less often when one measure takes
over a quarter of it (then four times that measure's length)."""

HOME_SECRETS: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".pgpass",
    ".my.cnf",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
    ".local/share/keyrings",
    # shell and REPL histories (passwords typed on command lines, tokens in curl calls)
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    # plait's own data (the thread store: every conversation) and cache
    ".local/share/plait",
    ".cache/plait",
)
"""Credential stores, histories and plait's own data inside a home folder (paths relative to
it), denied in the agent user's home (``~``, itself hidden whole by default) and in every home
folder under ``/home``."""

MAX_DENY_MATCHES = 4_096
"""Paths one ``read_deny`` entry with a ``*`` component may match; more is a
:class:`~plait.sandbox.errors.SandboxPolicyInvalid` (a host with more home folders than this
should name them, or hide ``/home`` whole)."""


DEFAULT_READ_DENY: tuple[str, ...] = (
    # the agent user's home, whole (the interpreter's prefix in it is bound back read-only)
    "~",
    # its credential stores, named too: still hidden when "~" is dropped from a policy
    *(f"~/{path}" for path in HOME_SECRETS),
    # plait's data and cache folders when the environment moves them out of ~
    "$PLAIT_HOME",
    "$XDG_DATA_HOME/plait",
    "$XDG_CACHE_HOME/plait",
    # every other user's (readable only when the agent runs as root, or when they are careless)
    *(f"/home/*/{path}" for path in HOME_SECRETS),
    # root-only secrets of the host: readable only when the agent runs as root (containers, CI)
    "/root",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
    "/etc/ssl/private",
    "/etc/krb5.keytab",
    # secrets mounted for containers (Docker/Kubernetes) and the users' runtime folders
    "/run/secrets",
    "/run/user",
    # the host's network interface names (the run's own network namespace has only lo)
    "/sys/class/net",
    "/sys/devices/virtual/net",
)
"""Paths hidden from every sandboxed process (they read as empty): the agent user's home
(``~``) whole, except the prefix of the interpreter a run starts (a virtualenv, pyenv or uv
Python under ``~`` is bound back read-only); the credential stores, histories and plait data
(:data:`HOME_SECRETS`) of every home folder under ``/home`` (the folders themselves stay
visible); plait's data and cache folders wherever the environment put them; container secrets
(``/run/secrets``) and runtime folders (``/run/user``); the host's root-only secrets (password
hashes, sudo rules, SSH host keys, TLS and Kerberos keys, root's home); the host's network
interface names under ``/sys``. Entries the agent's user cannot read are skipped, so other
users' stores and the root-only group matter mostly when the agent runs as root; then
``/root`` is its home."""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits of one run, applied as rlimits to the sandboxed process tree.

    =============== ========= ==================================================================
    field           default   effect when exceeded
    =============== ========= ==================================================================
    wall_seconds    300       the whole process tree is killed (a run's timeout is capped to it)
    cpu_seconds     60        the process gets SIGXCPU, one second later SIGKILL (per process)
    memory_bytes    2 GiB     address space (RLIMIT_AS): allocations fail (Python: MemoryError)
    open_files      256       opening more files fails (EMFILE)
    file_size_bytes 256 MiB   writing past it fails (EFBIG; SIGXFSZ for programs that keep it)
    processes       None      fork fails (RLIMIT_NPROC). Off by default: Linux counts *every*
                              process of the user against it and exempts root, so it is not a
                              per-sandbox cap; the PID namespace and ``wall_seconds`` bound a
                              fork bomb's life instead.
    workspace_bytes 512 MiB   the workspace holds more (sizes of its files, a sparse file at its
                              full length): the tree is killed. Measured every
                              :data:`WORKSPACE_POLL_SECONDS` and at exit, so a run can pass it
                              by what it writes in one interval (see the README)
    workspace_files 20,000    the workspace holds more entries (files, folders, links): killed;
                              ``None`` for either turns that measure off (the workspace tools'
                              ``shell`` runs in the user's own folder, which may hold more)
    tmp_bytes       256 MiB   the private ``/tmp`` (a tmpfs: memory) is full (ENOSPC)
    shm_bytes       64 MiB    ``/dev/shm`` (its own tmpfs) is full (ENOSPC)
    =============== ========= ==================================================================

    tmpfs pages are not address space: a run may hold ``memory_bytes + tmp_bytes + shm_bytes``
    of memory at most.
    """

    wall_seconds: float = 300.0
    cpu_seconds: int = 60
    memory_bytes: int = 2 * GIB
    open_files: int = 256
    file_size_bytes: int = 256 * MIB
    processes: int | None = None
    workspace_bytes: int | None = 512 * MIB
    workspace_files: int | None = 20_000
    tmp_bytes: int = 256 * MIB
    shm_bytes: int = 64 * MIB

    def check(self) -> None:
        """Raise :class:`SandboxPolicyInvalid` naming the first bad limit."""
        wall = self.wall_seconds
        if (
            isinstance(wall, bool)
            or not isinstance(wall, int | float)
            or not (math.isfinite(wall) and wall > 0)
        ):
            raise SandboxPolicyInvalid("SandboxLimits.wall_seconds must be a number > 0.")
        for name in (
            "cpu_seconds",
            "memory_bytes",
            "open_files",
            "file_size_bytes",
            "workspace_bytes",
            "workspace_files",
            "tmp_bytes",
            "shm_bytes",
        ):
            value = getattr(self, name)
            if value is None and name.startswith("workspace_"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SandboxPolicyInvalid(f"SandboxLimits.{name} must be an integer >= 1.")
        if self.memory_bytes < 64 * MIB:
            raise SandboxPolicyInvalid(
                "SandboxLimits.memory_bytes below 64 MiB leaves no room for an interpreter; "
                "raise it."
            )
        if self.open_files < 16:
            raise SandboxPolicyInvalid("SandboxLimits.open_files must be at least 16.")
        if self.processes is not None and self.processes < 1:
            raise SandboxPolicyInvalid("SandboxLimits.processes must be >= 1, or None (off).")

    def prlimit_args(self) -> list[str]:
        """The ``prlimit`` options that apply these limits (soft = hard; core dumps off)."""
        # CPU: soft first (SIGXCPU, which names the limit), hard one second later (SIGKILL).
        args = [f"--cpu={self.cpu_seconds}:{self.cpu_seconds + 1}"]
        pairs = [
            ("as", self.memory_bytes),
            ("nofile", self.open_files),
            ("fsize", self.file_size_bytes),
            ("core", 0),
        ]
        if self.processes is not None:
            pairs.append(("nproc", self.processes))
        return args + [f"--{name}={value}:{value}" for name, value in pairs]


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """Everything a sandboxed run may touch, readable in one screen.

    ================ ==========================================================================
    field            meaning
    ================ ==========================================================================
    read_deny        paths that read as empty: a folder becomes an empty read-only tmpfs, a
                     file an empty read-only file; paths that are missing or that the agent's
                     user cannot read are skipped (nothing to hide); one may start with
                     ``$VARIABLE`` (its value when a run starts; unset: skipped); a ``*``
                     path component matches every entry of its folder (``/home/*/.ssh``),
                     hidden ones too, at most :data:`MAX_DENY_MATCHES` paths per entry (a
                     ``*`` within a name is refused: it is no glob)
    write_allow      host paths writable besides the run's workspace (each must exist)
    write_deny       paths kept read-only even inside a writable one
    network          ``"off"``: a private network namespace (its own loopback only);
                     ``"on"``: the host's network
    unix_sockets     ``"off"``: ``socket(AF_UNIX)`` fails (seccomp), so host sockets on the
                     read-only file system (docker, D-Bus, ssh-agent) stay out of reach;
                     ``"on"``: allowed
    private_tmp      ``/tmp`` is an empty tmpfs private to the run (never reaches the host),
                     at most ``limits.tmp_bytes``
    user_namespaces  ``"off"``: the run cannot make a user namespace of its own (one would give
                     it every capability inside, and with them the kernel's namespaced attack
                     surface): bwrap's ``--disable-userns``, or a seccomp rule where bwrap is
                     older than 0.8; a host where neither works fails the first-use check
                     (cause ``userns-unblockable``) rather than run weaker.
                     ``BubblewrapSandbox.userns_guard`` says which one is in force.
                     ``"on"``: allowed (rootless containers, some browsers' sandboxes)
    limits           :class:`SandboxLimits`
    ================ ==========================================================================
    """

    read_deny: tuple[str, ...] = DEFAULT_READ_DENY
    write_allow: tuple[str, ...] = ()
    write_deny: tuple[str, ...] = ()
    network: Literal["off", "on"] = "off"
    unix_sockets: Literal["off", "on"] = "off"
    private_tmp: bool = True
    user_namespaces: Literal["off", "on"] = "off"
    limits: SandboxLimits = field(default_factory=SandboxLimits)

    def check(self) -> None:
        """Raise :class:`SandboxPolicyInvalid` naming the first problem (paths are checked
        for shape here, for existence when a run starts)."""
        for name in ("network", "unix_sockets", "user_namespaces"):
            value = getattr(self, name)
            if value not in ("off", "on"):
                raise SandboxPolicyInvalid(
                    f"SandboxPolicy.{name} must be 'off' or 'on', not {value!r}."
                )
        if not isinstance(self.private_tmp, bool):
            raise SandboxPolicyInvalid(
                f"SandboxPolicy.private_tmp must be True or False, not {self.private_tmp!r}."
            )
        if not isinstance(self.limits, SandboxLimits):
            raise SandboxPolicyInvalid(
                f"SandboxPolicy.limits must be a SandboxLimits, not {self.limits!r}."
            )
        for name in ("read_deny", "write_allow", "write_deny"):
            paths = getattr(self, name)
            if isinstance(paths, str):
                raise SandboxPolicyInvalid(
                    f"SandboxPolicy.{name} must be a tuple of paths, not one string."
                )
            for path in paths:
                _check_entry(name, path)
        self.limits.check()

    def denied_paths(self) -> list[str]:
        """The host paths ``read_deny`` names now, in order and without repeats: ``~``
        expanded, a component that is exactly ``*`` matched against every entry of its folder
        (hidden ones too; no other character is special), symlinks resolved. Only the matches
        of a ``*`` entry must exist. A match whose links lead out of the folder its last ``*``
        matched (``/home/mallory/.ssh -> /usr``) is kept only when that folder's owner owns
        where it leads: a user cannot hide (or break) what is not theirs. Raises
        :class:`SandboxPolicyInvalid` when one entry matches more than
        :data:`MAX_DENY_MATCHES` paths (or a folder it lists holds more)."""
        found: dict[str, None] = {}
        listings: dict[str, list[str]] = {}  # each folder listed once per call
        for raw in self.read_deny:
            where = _expand(raw)
            if where is None:
                continue  # a variable that is not set (or not an absolute path): nothing
            expanded = os.path.normpath(where)
            if "*" not in expanded.split("/"):
                target = os.path.realpath(expanded)
                if target != "/":  # '~' of a user whose home is '/': nothing to hide
                    found[target] = None
                continue
            matches = [("/", "/")]  # (path, the folder its last '*' matched)
            for part in expanded.split("/")[1:]:
                if part != "*":
                    matches = [(os.path.join(path, part), at) for path, at in matches]
                    continue
                paths = [
                    os.path.join(p, name) for p, _ in matches for name in _listing(p, listings)
                ]
                matches = [(path, path) for path in paths]
                if len(matches) > MAX_DENY_MATCHES:
                    raise _too_many(raw)
            for path, at in matches:
                real = _owned_target(path, at) if os.path.lexists(path) else None
                if real is not None:
                    found[real] = None
        return list(found)


def _check_entry(name: str, path: str) -> None:
    """Raise :class:`SandboxPolicyInvalid` when ``path`` of the ``name`` list is not absolute,
    names ``/``, or holds a ``*`` the policy would not expand (a whole ``*`` component, in
    ``read_deny`` only: any other would be taken literally and hide or protect nothing)."""
    if path.startswith("$") and name == "read_deny":
        variable, _, rest = path[1:].partition("/")
        if not variable.isidentifier():
            raise SandboxPolicyInvalid(
                f"SandboxPolicy.read_deny entry {path!r}: '$' must start a variable's name "
                "($XDG_DATA_HOME/plait)."
            )
        if not rest:
            return
        path = "/" + rest  # what follows the variable's value is checked as a path
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded) or "\x00" in expanded:
        raise SandboxPolicyInvalid(
            f"SandboxPolicy.{name} entry {path!r} must be an absolute path (or start with ~)."
        )
    # normpath keeps a leading '//' (POSIX leaves it to the system): '/' all the same
    parts = ("/" + os.path.normpath(expanded).lstrip("/")).split("/")
    starred = [part for part in parts if "*" in part]
    if starred and name != "read_deny":
        raise SandboxPolicyInvalid(
            f"SandboxPolicy.{name} entry {path!r}: '*' matches folders in read_deny only; name "
            "the paths."
        )
    if any(part != "*" for part in starred):
        raise SandboxPolicyInvalid(
            f"SandboxPolicy.read_deny entry {path!r}: only a whole '*' component matches (every "
            "entry of its folder, as in /home/*/.ssh); any other '*' would be taken literally "
            "and hide nothing. Name the paths."
        )
    if parts[1:] in ([""], ["*"]) and not (name == "read_deny" and path.startswith("~")):
        # (a home of '/', e.g. HOME=/ of a service user: '~' then hides nothing)
        raise SandboxPolicyInvalid(
            f"SandboxPolicy.{name} may not contain '/': name the folders instead."
        )


def _expand(raw: str) -> str | None:
    """``raw`` with ``~`` or a leading ``$VARIABLE`` expanded now; None when the variable is
    unset or not an absolute path."""
    if not raw.startswith("$"):
        return os.path.expanduser(raw)
    variable, _, rest = raw[1:].partition("/")
    value = os.environ.get(variable, "")
    if not os.path.isabs(value):
        return None
    return os.path.join(value, rest) if rest else value


def _owned_target(path: str, matched: str) -> str | None:
    """Where ``path`` leads, if that stays inside the folder ``matched`` leads to or belongs to
    that folder's owner; else ``None`` (a link planted there to hide someone else's files, or
    one that leads nowhere)."""
    real, folder = os.path.realpath(path), os.path.realpath(matched)
    if real == folder or real.startswith(folder.rstrip("/") + "/"):
        return real
    try:
        return real if os.stat(real).st_uid == os.stat(folder).st_uid else None
    except OSError:
        return None


def _listing(folder: str, listings: dict[str, list[str]]) -> list[str]:
    """The names in ``folder`` (none if it cannot be listed), at most ``MAX_DENY_MATCHES`` plus
    one (so the caller sees the bound passed)."""
    names = listings.get(folder)
    if names is None:
        try:
            with os.scandir(folder) as entries:
                names = [e.name for e in itertools.islice(entries, MAX_DENY_MATCHES + 1)]
        except OSError:
            names = []
        listings[folder] = names
    return names


def _too_many(entry: str) -> SandboxPolicyInvalid:
    default = entry.startswith("/home/*/") and entry in DEFAULT_READ_DENY
    hint = (
        " For the default '/home/*/' entries: read_deny=(*(p for p in DEFAULT_READ_DENY if "
        "not p.startswith('/home/*/')), '/home')."
        if default
        else ""
    )
    return SandboxPolicyInvalid(
        f"SandboxPolicy.read_deny entry {entry!r} matches more than {MAX_DENY_MATCHES:,} paths; "
        f"name the folders instead, or hide their parent whole.{hint}"
    )
