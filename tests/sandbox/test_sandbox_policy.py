"""The default deny list through a real ``bwrap``: every entry the agent's user can read on
this host reads as empty inside the sandbox, root's secrets included when the agent runs as
root, while the workspace, ``write_allow`` paths and the interpreter stay usable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plait.sandbox import (
    DEFAULT_READ_DENY,
    MAX_DENY_MATCHES,
    BubblewrapSandbox,
    SandboxCommand,
    SandboxPolicy,
    SandboxPolicyInvalid,
)

REPORT = """
import json, os, sys
seen = {}
for path in sys.argv[1:]:
    try:
        seen[path] = sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read()
    except OSError as error:
        seen[path] = type(error).__name__
print(json.dumps(seen))
"""

HOME_ENTRIES = [p for p in DEFAULT_READ_DENY if p.startswith("~/")]


def fill(home: Path) -> None:
    """Create every ``~`` entry of the default deny list under ``home``, with content."""
    for entry in HOME_ENTRIES:
        path = home / entry[2:]
        path.parent.mkdir(parents=True, exist_ok=True)
        if entry in ("~/.ssh", "~/.gnupg", "~/.aws", "~/.kube", "~/.password-store"):
            path.mkdir()
            (path / "key").write_text("secret")
        else:
            path.write_text("secret")


async def report(
    box: BubblewrapSandbox, workspace: Path, paths: list[str], python: str = sys.executable
) -> dict[str, object]:
    command = SandboxCommand((python, "-c", REPORT, *paths), workspace, 30, 1_000_000)
    run = await box.run(command)
    assert run.exit_code == 0, run.output
    seen: dict[str, object] = json.loads(run.output)
    return seen


def readable_defaults() -> list[str]:
    """The default entries this host's agent user can read (what the sandbox must hide)."""
    return [p for p in SandboxPolicy().denied_paths() if os.access(p, os.R_OK)]


def as_empty(paths: list[str]) -> dict[str, object]:
    return {p: ([] if os.path.isdir(p) else "") for p in paths}


def ways_to(python: str) -> list[str]:
    """Every path on the way to the interpreter ``python`` runs: each symlink it goes through
    to the real binary, and for a virtualenv the ``home =`` folder of its ``pyvenv.cfg`` (as
    written and resolved): what the sandbox must show, and all it may show, of a hidden home."""
    ways: list[str] = []
    path = os.path.abspath(python)
    for _ in range(40):
        ways.append(path)
        venv = Path(path).parent.parent / "pyvenv.cfg"
        if venv.is_file():
            for line in venv.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    ways += [value.strip(), os.path.realpath(value.strip())]
        if not os.path.islink(path):
            break
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
    return ways


async def check_defaults_read_as_empty(workspace: Path, python: str) -> dict[str, object]:
    """Run the default policy's report with ``python``: each readable default entry reads as
    empty (or is gone, inside another hidden folder: ~/.npmrc in /root), except that a folder
    on a way to the interpreter (a venv under ~/.cache, pyenv under ~ or /root) lists only the
    next step of each way. Returns what was seen."""
    visible = readable_defaults()
    seen = await report(BubblewrapSandbox(), workspace, visible, python)
    ways = ways_to(python)
    for path in visible:
        steps = sorted({w[len(path) + 1 :].split("/")[0] for w in ways if w.startswith(path + "/")})
        if steps:
            assert seen[path] == steps, path
        else:
            assert seen[path] in ([], "", "FileNotFoundError"), path
    return seen


async def test_every_readable_default_entry_reads_as_empty(tmp_path: Path) -> None:
    if os.getuid() == 0:  # root's secrets: the case this list exists for (containers, CI)
        assert {"/root", "/etc/shadow", "/etc/gshadow"} <= set(readable_defaults())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    await check_defaults_read_as_empty(workspace, sys.executable)


def poetry_layout(home: Path) -> tuple[Path, str]:
    """A venv in ``home/.cache`` (poetry's place) made with ``python -m venv`` from a Python in
    ``home/.pyenv`` (a link to this test's real interpreter); returns it and the version."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    pyenv_bin = home / ".pyenv" / "versions" / version / "bin"
    pyenv_bin.mkdir(parents=True)
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    (pyenv_bin / f"python{version}").symlink_to(base)
    (pyenv_bin / "python3").symlink_to(f"python{version}")
    venv = home / ".cache" / "pypoetry" / "virtualenvs" / "project-py"
    made = subprocess.run(
        [str(pyenv_bin / "python3"), "-m", "venv", "--without-pip", str(venv)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    return venv, version


async def test_a_venv_under_the_home_cache_made_from_a_pyenv_python_shows_both_ways_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # poetry's and uv's default places: the venv in ~/.cache, its Python in ~/.pyenv (here a
    # link to this test's real interpreter, which may itself sit under /root/.pyenv)
    home = tmp_path / "home"
    fill(home)
    (home / "notes.txt").write_text("secret")
    venv, version = poetry_layout(home)
    monkeypatch.setenv("HOME", str(home))
    for variable in ("PLAIT_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    python = str(venv / "bin" / "python")
    seen = await check_defaults_read_as_empty(workspace, python)
    assert seen[str(home)] == [".cache", ".pyenv"]  # both ways to the interpreter, nothing else
    shown = [str(home / ".cache"), str(home / ".pyenv" / "versions"), str(venv / "bin")]
    inside = await report(BubblewrapSandbox(), workspace, [*shown, str(home / "notes.txt")], python)
    assert inside[str(home / ".cache")] == ["pypoetry"]
    assert inside[str(home / ".pyenv" / "versions")] == [version]
    assert "python" in inside[str(venv / "bin")]  # type: ignore[operator]
    assert inside[str(home / "notes.txt")] == "FileNotFoundError"


async def test_the_home_credential_stores_read_as_empty_even_when_the_home_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    fill(home)
    (home / "notes.txt").write_text("readable")
    monkeypatch.setenv("HOME", str(home))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    shown = tuple(p for p in DEFAULT_READ_DENY if p != "~")  # a policy that shows the home
    box = BubblewrapSandbox(SandboxPolicy(read_deny=shown, private_tmp=False))
    paths = [str(home / e[2:]) for e in HOME_ENTRIES] + [str(home / "notes.txt")]
    seen = await report(box, workspace, paths)
    assert seen.pop(str(home / "notes.txt")) == "readable"
    assert seen == as_empty(paths[:-1])


async def test_paths_bound_inside_a_hidden_folder_stay_usable_and_nothing_else_shows(
    tmp_path: Path,
) -> None:
    hidden = tmp_path / "hidden"
    (hidden / "out").mkdir(parents=True)
    (hidden / "secret.txt").write_text("secret")
    (hidden / "keep").mkdir()
    (hidden / "keep" / "k.txt").write_text("secret")
    (hidden / "out" / "private.txt").write_text("secret")
    workspace = hidden / "ws"
    workspace.mkdir()
    policy = SandboxPolicy(
        read_deny=(str(hidden), str(hidden / "out" / "private.txt"), str(hidden / "secret.txt")),
        write_allow=(str(hidden / "out"),),
        write_deny=(str(hidden / "keep"),),  # kept read-only: must not show through the hiding
        private_tmp=False,
    )
    box = BubblewrapSandbox(policy)
    write = "open('../out/made.txt', 'w').write('made'); open('here.txt', 'w').write('here')"
    wrote = await box.run(SandboxCommand((sys.executable, "-c", write), workspace, 30, 10_000))
    assert wrote.exit_code == 0, wrote.output
    assert (hidden / "out" / "made.txt").read_text() == "made"
    assert (workspace / "here.txt").read_text() == "here"
    seen = await report(box, workspace, [str(hidden), str(hidden / "out" / "private.txt")])
    assert seen == {str(hidden): ["out", "ws"], str(hidden / "out" / "private.txt"): ""}


async def test_a_write_allow_folder_that_is_also_denied_stays_writable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id").write_text("secret")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    policy = SandboxPolicy(
        read_deny=(str(home), str(home / ".ssh")), write_allow=(str(home),), private_tmp=False
    )
    box = BubblewrapSandbox(policy)
    write = f"open({str(home / 'out.txt')!r}, 'w').write('made')"
    wrote = await box.run(SandboxCommand((sys.executable, "-c", write), workspace, 30, 10_000))
    assert wrote.exit_code == 0, wrote.output
    seen = await report(box, workspace, [str(home / ".ssh")])
    assert (home / "out.txt").read_text() == "made" and seen == {str(home / ".ssh"): []}


OTHER_HOMES = [p for p in DEFAULT_READ_DENY if p.startswith("/home/*/")]


def test_each_home_entry_is_denied_in_every_home_folder_under_home() -> None:
    assert [f"/home/*/{e[2:]}" for e in HOME_ENTRIES] == OTHER_HOMES
    assert "/root" in DEFAULT_READ_DENY  # root's home: hidden whole
    assert "/home" not in DEFAULT_READ_DENY and "/home/*" not in DEFAULT_READ_DENY


async def test_other_users_credential_stores_read_as_empty_and_their_homes_stay(
    tmp_path: Path,
) -> None:
    # The default /home/*/ entries, rebased into a root this test controls.
    root = tmp_path / "host"
    users = ["alice", "bob", ".hidden-user"]
    for user in users:
        fill(root / "home" / user)
        (root / "home" / user / "notes.txt").write_text(f"{user}'s notes")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    deny = tuple(f"{root}{entry}" for entry in OTHER_HOMES)
    box = BubblewrapSandbox(SandboxPolicy(read_deny=deny, private_tmp=False))
    secrets = [str(root / "home" / u / e[2:]) for u in users for e in HOME_ENTRIES]
    notes = [str(root / "home" / u / "notes.txt") for u in users]
    seen = await report(box, workspace, [*secrets, *notes, str(root / "home")])
    listed = seen.pop(str(root / "home"))
    assert isinstance(listed, list) and sorted(listed) == sorted(users)  # homes stay visible
    assert [seen.pop(n) for n in notes] == [f"{u}'s notes" for u in users]
    assert seen == as_empty(secrets)


async def test_a_wildcard_entry_matching_too_many_paths_is_refused(tmp_path: Path) -> None:
    homes = tmp_path / "home"
    for index in range(MAX_DENY_MATCHES + 1):
        (homes / f"u{index}" / ".ssh").mkdir(parents=True)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    box = BubblewrapSandbox(SandboxPolicy(read_deny=(f"{homes}/*/.ssh",), private_tmp=False))
    command = SandboxCommand((sys.executable, "-c", "pass"), workspace, 30, 1_000)
    with pytest.raises(
        SandboxPolicyInvalid, match=f"matches more than {MAX_DENY_MATCHES:,}"
    ) as info:
        await box.run(command)
    assert f"entry '{homes}/*/.ssh'" in str(info.value)  # the entry as written


async def test_a_link_in_another_users_home_hides_only_what_that_user_owns(
    tmp_path: Path,
) -> None:
    # mallory (another uid) points her .ssh at /usr and her .aws at /etc: denying where the
    # links lead would break or blind every sandboxed run; alice's .ssh leads to a folder of
    # her own outside her home (managed dotfiles), which stays hidden.
    homes, keys = tmp_path / "home", tmp_path / "keys"
    mallory, alice = homes / "mallory", homes / "alice"
    for folder in (mallory, alice, keys / "alice"):
        folder.mkdir(parents=True)
    (keys / "alice" / "id").write_text("secret")
    (mallory / ".ssh").symlink_to("/usr")
    (mallory / ".aws").symlink_to("/etc")
    (alice / ".ssh").symlink_to(keys / "alice")
    if os.getuid() == 0:  # else /usr and /etc (root's) already differ from the test's user
        os.chown(mallory, 65534, 65534)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    policy = SandboxPolicy(read_deny=(f"{homes}/*/.ssh", f"{homes}/*/.aws"), private_tmp=False)
    assert policy.denied_paths() == [str(keys / "alice")]
    seen = await report(BubblewrapSandbox(policy), workspace, ["/usr", "/etc", str(keys / "alice")])
    assert seen.pop(str(keys / "alice")) == []
    assert seen == {"/usr": sorted(os.listdir("/usr")), "/etc": sorted(os.listdir("/etc"))}


AS_USER = """
import asyncio, json, os, sys
from pathlib import Path
from plait.sandbox import BubblewrapSandbox, SandboxCommand
home, python, workspace = sys.argv[1:4]
paths = sys.argv[4:]
outside = {p: open(p).read() for p in paths if os.path.isfile(p)}  # readable to this user
code = "import sys; print(sys.prefix, end=' ')\\n" + REPORT
command = SandboxCommand((python, "-c", code, *paths), Path(workspace), 60, 1_000_000)
run = asyncio.run(BubblewrapSandbox().run(command))
prefix, _, seen = run.output.partition(" ")
print(json.dumps({"uid": os.getuid(), "exit": run.exit_code, "prefix": prefix,
                  "outside": outside, "seen": json.loads(seen) if run.exit_code == 0 else seen}))
"""

SECRETS = """
mount -t tmpfs tmpfs /run && mkdir -m 755 /run/secrets &&
echo token > /run/secrets/api_token && chmod 644 /run/secrets/api_token && exec "$@"
"""


def as_ordinary_user(home: Path) -> tuple[list[str], str]:
    """The command prefix that runs a program as an unprivileged user with a fresh
    ``/run/secrets`` (in a mount namespace of its own), and the Python it can execute.
    As root: uid 54321 through ``setpriv`` (no passwd entry needed), Debian's
    ``/usr/bin/python3``; as an ordinary user: that user (mapped back to itself in a user
    namespace nested in the one that mounted), and this interpreter."""
    if os.getuid() != 0:  # root in a user namespace mounts; a nested one maps the user back
        back = ["unshare", f"--map-user={os.getuid()}", f"--map-group={os.getgid()}"]
        return ["unshare", "--map-root-user", "--mount", "sh", "-c", SECRETS, "sh", *back], (
            sys.executable
        )
    for path in [home, *home.rglob("*")]:
        os.lchown(path, 54321, 54321)
    drop = ["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups"]
    return ["unshare", "--mount", "sh", "-c", SECRETS, "sh", *drop], "/usr/bin/python3"


def test_an_ordinary_users_secrets_are_hidden_while_its_venv_interpreter_runs() -> None:
    import shutil
    import subprocess
    import tempfile

    import plait

    # outside /tmp (the private /tmp would hide it anyway) and not 0700 like tmp_path
    root = Path(tempfile.mkdtemp(prefix="plait-user-", dir="/var/tmp"))
    try:
        root.chmod(0o755)
        home, workspace = root / "home", root / "ws"
        store = home / ".local" / "share" / "plait" / "threads.sqlite3"
        store.parent.mkdir(parents=True)
        store.write_text("every conversation")
        (home / ".bash_history").write_text("export TOKEN=secret")
        workspace.mkdir()
        base = "/usr/bin/python3" if os.getuid() == 0 else sys.executable
        subprocess.run([base, "-m", "venv", "--without-pip", str(home / ".venv")], check=True)
        wrap, base = as_ordinary_user(home)  # (after home is filled: root chowns it)
        os.chown(workspace, *(os.stat(home).st_uid, os.stat(home).st_gid))
        python = str(home / ".venv" / "bin" / "python")
        paths = [str(store), str(home / ".bash_history"), "/run/secrets/api_token"]
        env = {"HOME": str(home), "PATH": os.defpath}
        env["PYTHONPATH"] = str(Path(plait.__file__).parents[1])
        script = f"REPORT = {REPORT!r}\n{AS_USER}"
        argv = [*wrap, base, "-c", script, str(home), python, str(workspace), *paths]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        report_ = json.loads(done.stdout)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert report_["uid"] != 0 and report_["exit"] == 0, report_
    assert set(report_["outside"]) == set(paths)  # readable to the user, outside the sandbox
    assert report_["prefix"] == str(home / ".venv")  # the venv under the hidden home runs
    assert report_["seen"] == dict.fromkeys(paths, "FileNotFoundError")


def test_plaits_folders_are_hidden_wherever_the_environment_puts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PLAIT_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        (tmp_path / name.lower() / "plait").mkdir(parents=True)
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert "$PLAIT_HOME" in DEFAULT_READ_DENY
    unset = SandboxPolicy().denied_paths()
    assert not any(p.startswith(str(tmp_path / "plait_home")) for p in unset)  # unset: skipped
    monkeypatch.setenv("PLAIT_HOME", str(tmp_path / "plait_home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg_data_home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored
    denied = SandboxPolicy().denied_paths()
    assert str(tmp_path / "plait_home") in denied
    assert str(tmp_path / "xdg_data_home" / "plait") in denied
    assert not any("relative" in p for p in denied)
    with pytest.raises(SandboxPolicyInvalid, match="'\\$' must start a variable's name"):
        SandboxPolicy(read_deny=("$1/x",)).check()
