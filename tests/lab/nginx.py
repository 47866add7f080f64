"""The real nginx, with the config the construct generates, in front of one lab engine.

:func:`lab_nginx_config` is the ONE place that knows how the construct's generator is called
(``llm_affinity.constructs.userdata.nginx_config``); when its signature changes, adapt only it.
What the lab changes, and only that: a writable pid file, error log and temp paths under the
lab's folder, one worker process, the boot-time ``__INSTANCE_ID__`` placeholder replaced by the
lab's instance id, and any ``access_log`` file path moved into the lab's folder.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
_USERDATA = Path(__file__).resolve().parents[2] / "llm_affinity" / "constructs" / "userdata.py"


def _userdata():
    """The generator module, loaded by path: importing the package would load aws_cdk."""
    spec = importlib.util.spec_from_file_location("_lab_userdata", _USERDATA)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def lab_nginx_config(
    instance_id: str,
    listen_port: int,
    upstream_port: int,
    workdir: Path,
    *,
    session_header: str = "X-Session-Id",
    cookie_name: str = "llm_session",
) -> str:
    """The construct's nginx.conf for one lab instance (see the module docstring)."""
    userdata = _userdata()
    spec = userdata.CookieProxySpec(cookie_name=cookie_name, session_header=session_header, listen_port=listen_port)
    conf = userdata.nginx_config(spec, upstream_port)
    conf = conf.replace("__INSTANCE_ID__", instance_id)
    conf = re.sub(r"access_log\s+/[^\s;]+", f"access_log {workdir}/access.log", conf)
    conf = re.sub(
        r"worker_processes\s+\w+;",
        (f"worker_processes 1;\npid {workdir}/nginx.pid;\nerror_log {workdir}/error.log warn;"),
        conf,
        count=1,
    )
    temp = "".join(
        f"  {kind}_temp_path {workdir}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return re.sub(r"http\s*\{\n", lambda m: m.group(0) + temp, conf, count=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NginxProxy:
    """One nginx master process (started here, stopped by its own pid in :meth:`close`)."""

    def __init__(self, instance_id: str, upstream_port: int, workdir: Path, **config_kwargs: str) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config = lab_nginx_config(instance_id, self.port, upstream_port, self.workdir, **config_kwargs)
        conf = self.workdir / "nginx.conf"
        conf.write_text(self.config)
        self._proc = subprocess.Popen(
            [
                NGINX,
                "-e",
                str(self.workdir / "error.log"),
                "-p",
                str(self.workdir),
                "-c",
                str(conf),
                "-g",
                "daemon off;",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {self._proc.stderr.read().decode(errors='replace').strip()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        self.close()
        raise RuntimeError("nginx did not start listening within 5 s")

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stderr:
            self._proc.stderr.close()
