"""docker-compose.yml describes the deployed shape (no Docker engine is needed to check it)."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_is_the_ray_shape_with_health_checks_and_nothing_unused():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"web", "dispatcher", "ray-head", "ray-cpu", "ray-gpu", "postgres"}  # Redis is gone
    for name, svc in services.items():
        assert svc.get("healthcheck", {}).get("test"), f"{name} has no health check"
    devices = services["ray-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert services["ray-gpu"]["build"]["dockerfile"] == "Dockerfile.gpu"
    for name in ("web", "dispatcher"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["COURSE_ENV"] == "production" and env["COURSE_EXECUTOR"] == "ray"
        assert env["RAY_ADDRESS"] == "ray-head:6379"
        assert services[name]["volumes"] == ["data:/data"]  # bundles: only web and dispatcher touch them
    assert int(services["web"]["environment"]["COURSE_WEB_PROCESSES"]) > 1
    assert services["web"]["environment"]["COURSE_DISPATCHER"] == "0"  # one dispatcher: its own service
    assert services["web"]["command"][-4:] == ["--host", "0.0.0.0", "--port", "8000"]
    for name in ("ray-head", "ray-cpu", "ray-gpu"):  # the lab hosts share no disk and no database with the web
        svc = services[name]
        assert "volumes" not in svc and "DATABASE_URL" not in svc.get("environment", {})
    head = services["ray-head"]["command"]
    assert "--head" in head and "--num-cpus=0" in head and "--num-gpus=0" in head  # labs never run on the head
    for name in ("ray-cpu", "ray-gpu"):
        assert "$(python -m app ray-node-flags)" in services[name]["command"][-1]
    # Ray needs one Python on every node: the CPU image is built with the GPU image's Python
    assert services["web"]["build"]["args"]["PYTHON_VERSION"] == "3.12"
    assert services["web"]["build"]["args"]["EXTRAS"] == "[ray]"


def test_gpu_image_is_the_ngc_pytorch_image_with_transformer_engine():
    text = (ROOT / "Dockerfile.gpu").read_text()
    base = [ln for ln in text.splitlines() if ln.startswith("FROM ")]
    assert base == ["FROM nvcr.io/nvidia/pytorch:25.12-py3"]
    assert "--constraint /etc/pip/constraint.txt" in text  # the image's torch and TE are kept
    assert '".[ray]"' in text and "import transformer_engine.pytorch, ray" in text
    cpu = (ROOT / "Dockerfile").read_text()
    assert "ARG PYTHON_VERSION" in cpu and "FROM python:${PYTHON_VERSION}-slim" in cpu


def test_production_refuses_default_secret():
    import pytest

    from app.core.config import DEV_SECRET, Settings, SettingsError

    with pytest.raises(SettingsError, match="COURSE_SECRET_KEY"):
        Settings.from_env({"COURSE_ENV": "production"})
    with pytest.raises(SettingsError, match="refused in production"):
        Settings.from_env({"COURSE_ENV": "production", "COURSE_SECRET_KEY": DEV_SECRET})
    with pytest.raises(SettingsError, match="COURSE_WORKERS: got 99"):
        Settings.from_env({"COURSE_WORKERS": "99"})


def _final_user(dockerfile: str) -> str | None:
    """The user the image's command runs as: its last USER line (None: root, Docker's default)."""
    users = [ln.split()[1] for ln in (ROOT / dockerfile).read_text().splitlines() if ln.startswith("USER ")]
    return users[-1] if users else None


def test_no_container_runs_as_root():
    """Code that gets out of a lab or the web process must not own the container. Both images end as
    `course` (a fixed uid, so a bind mount can be given to it), made before the USER line with the directories its
    services write (/data: bundles and uploads; /scratch: a Ray node's lab folders) owned by it; compose overrides
    no image's user but PostgreSQL's, which starts as `postgres` instead of root."""
    for dockerfile, dirs in (("Dockerfile", "/data /scratch"), ("Dockerfile.gpu", "/scratch")):
        text = (ROOT / dockerfile).read_text()
        assert _final_user(dockerfile) == "course", dockerfile
        assert "useradd --system --uid 10001" in text and f"chown course:course {dirs}" in text, dockerfile
        assert text.index("useradd") < text.index("\nUSER course") < text.index("\nCMD "), dockerfile
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert services["postgres"]["user"] == "postgres"
    for name, svc in services.items():
        assert svc.get("user", "course" if name != "postgres" else None) not in ("root", "0", "0:0"), name
    assert services["ray-cpu"]["environment"]["COURSE_NODE_DATA_DIR"] == "/scratch"  # the directory made for it
    assert services["ray-gpu"]["environment"]["COURSE_NODE_DATA_DIR"] == "/scratch"
    assert services["web"]["environment"]["COURSE_DATA_DIR"] == "/data"
