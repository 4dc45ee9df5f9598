"""docker-compose.yml's strings as compose reads them, and the Ray node command as the node's shell runs it.

Compose interpolates every string: `${VAR}` and `$VAR` are variables, `$$` is a literal `$`, and any other `$`
(such as the `$(` of a command substitution) is an invalid template that makes compose refuse the whole file.
The pattern below is compose-go's (template/template.go, compose-spec/compose-go, the library `docker compose`
uses); no Docker engine is needed to check it.
"""

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_PATTERN = re.compile(
    r"\$(?i:(?P<escaped>\$)|(?P<named>[_a-z][_a-z0-9]*)|{(?P<braced>[_a-z][_a-z0-9]*(?::?[-?](.*}|[^}]*))?)}|(?P<invalid>))"
)


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _interpolate(text: str, env: dict) -> str:
    def one(m: re.Match) -> str:
        assert m.group("invalid") is None, f"compose refuses this string (a bare `$`; write `$$`): {text!r}"
        if m.group("escaped"):
            return "$"
        name = m.group("named") or re.split(r":?[-?]", m.group("braced"))[0]
        return env.get(name, "")

    return COMPOSE_PATTERN.sub(one, text)


def test_compose_reads_every_string_of_the_file():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for text in _strings(compose):
        _interpolate(text, {})


def test_a_ray_node_starts_with_its_flags_or_not_at_all(tmp_path):
    """The node command as its container runs it (the image's COURSE_ENV=production, no secret key and no database:
    a lab host needs neither): `ray start` gets the probe's flags, and a node that cannot print them never starts."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # the venv's, as the image's
    (bin_dir / "python").chmod(0o755)
    ray = bin_dir / "ray"
    ray.write_text('#!/bin/sh\necho "ray $*"\n')  # stands in for `ray start`, which would join a cluster
    ray.chmod(0o755)
    for name in ("ray-cpu", "ray-gpu"):
        svc = compose["services"][name]
        command = [_interpolate(part, {}) for part in svc["command"]]
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "COURSE_ENV": "production", "HOME": str(tmp_path)}
        env |= {k: _interpolate(str(v), {"RAY_AUTH_TOKEN": "a-token"}) for k, v in svc["environment"].items()}
        run = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith("ray start --address=ray-head:6379 --num-cpus="), run.stdout
        assert "--labels=course/te=" in run.stdout and run.stdout.rstrip().endswith("--disable-usage-stats --block")
        failing = tmp_path / "failing"  # a probe that fails: no `ray start` at all
        failing.mkdir(exist_ok=True)
        (failing / "python").write_text("#!/bin/sh\necho 'probe failed' >&2\nexit 3\n")
        (failing / "python").chmod(0o755)
        broken = env | {"PATH": f"{failing}:{bin_dir}:/usr/bin:/bin"}
        run = subprocess.run(command, env=broken, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode != 0 and "ray start" not in run.stdout and "probe failed" in run.stderr


def test_every_service_that_talks_to_ray_needs_the_clusters_token():
    """Ray 2.60 runs a `ray start` cluster without authentication unless RAY_AUTH_MODE=token, and anyone reaching
    its ports can then run code on it; compose refuses to start without the shared token."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, svc in compose["services"].items():
        env = svc.get("environment", {})
        if name == "postgres":
            assert not any(k.startswith("RAY_") for k in env)
            continue
        assert env["RAY_AUTH_MODE"] == "token", name
        assert env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?"), name  # required: compose stops without it
