"""docker-compose.yml describes the deployed shape (no Docker engine is needed to check it)."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_has_the_services_and_gpu_reservation():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"web", "worker-cpu", "worker-gpu", "postgres", "redis"} <= set(services)
    devices = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    for name in ("web", "worker-cpu", "worker-gpu"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["COURSE_ENV"] == "production"
        assert "/data" in services[name]["volumes"][0]
    assert services["web"]["command"][-4:] == ["--host", "0.0.0.0", "--port", "8000"]


def test_production_refuses_default_secret():
    import pytest

    from app.config import DEV_SECRET, Settings, SettingsError

    with pytest.raises(SettingsError, match="COURSE_SECRET_KEY"):
        Settings.from_env({"COURSE_ENV": "production"})
    with pytest.raises(SettingsError, match="refused in production"):
        Settings.from_env({"COURSE_ENV": "production", "COURSE_SECRET_KEY": DEV_SECRET})
    with pytest.raises(SettingsError, match="COURSE_WORKERS: got 99"):
        Settings.from_env({"COURSE_WORKERS": "99"})
