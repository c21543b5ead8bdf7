"""One SSH connection per node (paramiko): shell commands with a deadline, and SFTP.

Host keys are checked against known_hosts like OpenSSH's `StrictHostKeyChecking yes`: an
unknown key refuses the connection, and so does a changed one. `accept_new=True` is
OpenSSH's `accept-new`: an unknown key is trusted and appended to known_hosts, a changed
one is still refused. Every failure becomes one sentence naming the node (exit 255).

Every command is a shell script run as `sh -c SCRIPT` (through `sudo -n` for a node with
`sudo = true`); values that come from node names, paths or options are put into scripts
with `q()` (shlex.quote), never pasted raw. Secrets (passphrase, password) are read from
the environment when connecting and kept nowhere else.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shlex
import socket
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko

from leaseline.harness.clusters.ssh.hosts import HostSpec
from leaseline.harness.errors import EnvironmentProblem

_known_hosts_lock = threading.Lock()
# paramiko logs transport errors (with tracebacks) from its own threads; every failure that
# matters reaches the user as one sentence from here instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
logging.getLogger("paramiko").propagate = False


def q(value: object) -> str:
    """One shell word, whatever the value holds (spaces, quotes, $, ;)."""
    return shlex.quote(str(value))


class SshFailure(EnvironmentProblem):
    """A node could not be reached, refused us, or a command on it failed."""


class CommandFailed(SshFailure):
    def __init__(self, sentence: str, returncode: int, stderr: str) -> None:
        super().__init__(sentence)
        self.returncode = returncode
        self.stderr = stderr


class UnknownHostKey(paramiko.SSHException):
    pass


class _Reject(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        raise UnknownHostKey(hostname)


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """OpenSSH's accept-new: remember an unknown key (a changed one never gets here)."""

    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        line = paramiko.hostkeys.HostKeyEntry([hostname], key).to_line()
        with _known_hosts_lock:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
            with self.known_hosts.open("a") as f:
                f.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


class SshNode:
    """A node's SSH connection, opened on first use and shared by threads (one channel per
    command; the SFTP session is serialised by a lock)."""

    def __init__(self, spec: HostSpec, known_hosts: Path, accept_new: bool = False) -> None:
        self.spec = spec
        self.known_hosts = known_hosts
        self.accept_new = accept_new
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def where(self) -> str:
        return f"{self.spec.user}@{self.spec.address}:{self.spec.port}"

    # -- connection ----------------------------------------------------------------------
    def connect(self) -> paramiko.SSHClient:
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is not None and transport.is_active():
                return self._client  # type: ignore[return-value]
            self.close()
            self._client = self._open()
            return self._client

    def _secret(self, env: str | None, what: str) -> str | None:
        if env is None:
            return None
        value = os.environ.get(env)
        if value is None:
            raise SshFailure(f"node {self.name}: the environment variable {env} that should "
                             f"hold its {what} is not set.")
        return value

    def _key(self) -> paramiko.PKey | None:
        if self.spec.key_file is None:
            return None
        try:
            secret = self._secret(self.spec.passphrase_env, "key passphrase")
            return paramiko.PKey.from_path(self.spec.key_file,
                                           secret.encode() if secret is not None else None)
        except paramiko.PasswordRequiredException:
            raise SshFailure(f"node {self.name}: its key file is encrypted; name the variable "
                             "holding its passphrase with passphrase_env.") from None
        except (OSError, ValueError, paramiko.SSHException) as e:
            why = "wrong passphrase" if self.spec.passphrase_env else e.__class__.__name__
            raise SshFailure(f"node {self.name}: its key file cannot be loaded ({why}).") from None

    def _open(self) -> paramiko.SSHClient:
        spec = self.spec
        client = paramiko.SSHClient()
        with _known_hosts_lock:
            if self.known_hosts.is_file():
                try:
                    client.load_host_keys(str(self.known_hosts))
                except (OSError, paramiko.SSHException, ValueError) as e:
                    raise SshFailure(f"known_hosts file {self.known_hosts} cannot be read "
                                     f"({e}).") from None
        client.set_missing_host_key_policy(
            _AcceptNew(self.known_hosts) if self.accept_new else _Reject())
        try:
            client.connect(
                spec.address, port=spec.port, username=spec.user, pkey=self._key(),
                password=self._secret(spec.password_env, "password"),
                timeout=spec.connect_timeout_s, banner_timeout=spec.connect_timeout_s,
                auth_timeout=spec.connect_timeout_s,
                allow_agent=spec.key_file is None, look_for_keys=spec.key_file is None,
            )
        except UnknownHostKey:
            client.close()
            raise SshFailure(
                f"node {self.name} ({spec.address}:{spec.port}) offers a host key that is not "
                f"in {self.known_hosts}; refusing to connect (add it to that file, e.g. with "
                "ssh-keyscan after checking it, or pass --ssh-accept-new-keys)."
            ) from None
        except paramiko.BadHostKeyException:
            client.close()
            raise SshFailure(
                f"node {self.name} ({spec.address}:{spec.port}) offers a host key that differs "
                f"from the one in {self.known_hosts}; refusing to connect (if the machine was "
                "reinstalled, remove its old line from that file)."
            ) from None
        except paramiko.PasswordRequiredException:
            client.close()
            raise SshFailure(f"node {self.name}: its key file is encrypted; name the variable "
                             "holding its passphrase with passphrase_env.") from None
        except paramiko.AuthenticationException:
            client.close()
            raise SshFailure(f"node {self.name} ({self.where}) refused the SSH login with the "
                             "given credentials.") from None
        except (OSError, EOFError) as e:
            client.close()
            why = "timed out" if isinstance(e, TimeoutError | socket.timeout) else (
                e.strerror or e.__class__.__name__)
            raise SshFailure(f"node {self.name} cannot be reached over SSH at "
                             f"{spec.address}:{spec.port} ({why}).") from None
        except paramiko.SSHException as e:
            client.close()
            raise SshFailure(f"SSH to node {self.name} ({spec.address}:{spec.port}) failed "
                             f"({e}).") from None
        return client

    def close(self) -> None:
        with self._lock:
            if self._sftp is not None:
                with contextlib.suppress(Exception):
                    self._sftp.close()
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
            self._sftp, self._client = None, None

    # -- commands ------------------------------------------------------------------------
    def command_line(self, script: str, privileged: bool = False) -> str:
        line = f"sh -c {q(script)}"
        return f"sudo -n {line}" if privileged and self.spec.sudo else line

    def run(self, script: str, what: str, timeout_s: float | None = None, check: bool = True,
            privileged: bool = False) -> Result:
        """Runs script on the node; CommandFailed (one sentence) on a non-zero exit if check."""
        timeout_s = self.spec.command_timeout_s if timeout_s is None else timeout_s
        client = self.connect()
        transport = client.get_transport()
        try:
            assert transport is not None
            chan = transport.open_session(timeout=self.spec.connect_timeout_s)
            chan.exec_command(self.command_line(script, privileged))
            out, err, rc = self._collect(chan, timeout_s)
        except (paramiko.SSHException, OSError, EOFError) as e:
            self.close()
            raise SshFailure(f"{what} on node {self.name}: the SSH connection failed "
                             f"({e or e.__class__.__name__}).") from None
        if rc is None:
            raise SshFailure(f"{what} on node {self.name} did not finish within "
                             f"{timeout_s:g} s.")
        result = Result(rc, out, err)
        if check and rc != 0:
            raise CommandFailed(self.failure_sentence(what, result), rc, err)
        return result

    def failure_sentence(self, what: str, result: Result) -> str:
        text = result.stderr + result.stdout
        if "No space left on device" in text or "Disk quota exceeded" in text:
            return f"{what} on node {self.name} failed: its disk is full ({last_line(text)})."
        if result.returncode == 127:
            return f"{what} on node {self.name} failed: a command is missing ({last_line(text)})."
        detail = last_line(text) or "no output"
        return f"{what} on node {self.name} failed (exit {result.returncode}: {detail})."

    @staticmethod
    def _collect(chan: paramiko.Channel, timeout_s: float) -> tuple[str, str, int | None]:
        deadline = time.monotonic() + timeout_s
        out, err = bytearray(), bytearray()
        try:
            while True:
                while chan.recv_ready():
                    out += chan.recv(65536)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                if chan.exit_status_ready() and chan.eof_received and not (
                        chan.recv_ready() or chan.recv_stderr_ready()):
                    return (out.decode(errors="replace"), err.decode(errors="replace"),
                            chan.recv_exit_status())
                left = deadline - time.monotonic()
                if left <= 0:
                    return out.decode(errors="replace"), err.decode(errors="replace"), None
                select.select([chan], [], [], min(left, 0.05))
        finally:
            chan.close()

    # -- files ---------------------------------------------------------------------------
    def _sftp_client(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            self._sftp = self.connect().open_sftp()
        return self._sftp

    def read_file(self, path: str) -> bytes | None:
        """A file's bytes, or None if it is missing (or not a file)."""
        with self._lock:
            try:
                sftp = self._sftp_client()
                if not stat.S_ISREG(sftp.stat(path).st_mode or 0):
                    return None
                with sftp.open(path, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return None
            except (OSError, paramiko.SSHException, EOFError) as e:
                self._sftp = None
                raise SshFailure(f"reading {path} from node {self.name} over SFTP failed "
                                 f"({e}).") from None

    def upload_tree(self, local: Path, remote: str) -> int:
        """Copies a file or folder (without __pycache__) to remote; returns the files sent."""
        files = [local] if local.is_file() else sorted(
            p for p in local.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        with self._lock:
            try:
                sftp = self._sftp_client()
                for path in files:
                    rel = "" if path == local else path.relative_to(local).as_posix()
                    target = f"{remote}/{rel}" if rel else remote
                    self._mkdirs(sftp, target.rsplit("/", 1)[0])
                    sftp.put(str(path), target)
            except (OSError, paramiko.SSHException, EOFError) as e:
                self._sftp = None
                full = "No space left" in str(e) or getattr(e, "errno", None) == 28
                why = "its disk is full" if full else str(e) or e.__class__.__name__
                raise SshFailure(f"uploading {local.name} to node {self.name} failed "
                                 f"({why}).") from None
        return len(files)

    @staticmethod
    def _mkdirs(sftp: paramiko.SFTPClient, path: str) -> None:
        parts, at = [p for p in path.split("/") if p], "/" if path.startswith("/") else ""
        for part in parts:
            at = f"{at}{part}" if at in ("", "/") else f"{at}/{part}"
            try:
                sftp.stat(at)
            except FileNotFoundError:
                sftp.mkdir(at)
