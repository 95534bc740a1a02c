"""deploy/kubernetes/: valid against the Kubernetes API schemas (strict, offline: the validator
ships them), and consistent with the service (its commands, probes, secret files and settings).
Validated, not run: no cluster here (docs/several-machines.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML (a dev dependency) reads the manifests")

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
VALIDATOR = [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", "1.31.0"]


def _kinds() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            found[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return found


def _validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (dev extra)")
    # No network: the schemas come with the package (a proxy that answers nothing proves it).
    env = {"PATH": "/usr/bin:/bin", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
    return subprocess.run(
        [*VALIDATOR, *map(str, paths)], capture_output=True, text=True, check=False, env=env
    )


def test_every_manifest_is_valid_offline() -> None:
    run = _validate(*MANIFESTS)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("passed") == len(MANIFESTS)


def test_a_wrong_field_fails_the_check(tmp_path: Path) -> None:
    broken = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "deployment.yaml").read_text())
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGets"] = {}
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(broken))
    run = _validate(path)
    assert run.returncode != 0 and "httpGets" in run.stdout + run.stderr


def test_the_manifests_name_what_the_service_has() -> None:
    from generic_framework.chats.telegram.settings import TelegramSettings
    from generic_framework.config import Settings

    kinds = _kinds()
    assert {"Deployment/generic-framework", "PodDisruptionBudget/generic-framework",
            "Service/generic-framework", "Job/generic-framework-db-upgrade",
            "Deployment/generic-framework-telegram"} <= set(kinds)  # fmt: skip
    known = {name.upper() for name in Settings.model_fields} | {
        name.upper() for name in TelegramSettings.model_fields
    }
    known |= {"OPENAI_API_KEY", "ZAI_API_KEY"}
    secret = kinds["Secret/generic-framework-secrets"]["stringData"]
    for name in ("Deployment/generic-framework", "Deployment/generic-framework-telegram",
                 "Job/generic-framework-db-upgrade"):  # fmt: skip
        pod = kinds[name]["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["command"][0] == "generic-framework"
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        files = {
            item["path"]
            for volume in pod["volumes"]
            if "secret" in volume
            for item in volume["secret"]["items"]
        }
        for variable in container.get("env", []):
            if variable["name"].endswith("_FILE"):
                assert variable["name"].removesuffix("_FILE") in known, variable
                folder, _, file = variable["value"].rpartition("/")
                assert folder == mounts["secrets"] and file in files and file in secret
            else:
                assert variable["name"] in known, variable
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    settings = kinds["ConfigMap/generic-framework-settings"]["data"]
    assert set(settings) <= known
    assert not {"DATABASE_URL", "BOT_API_TOKEN", "OPENAI_API_KEY", "ZAI_API_KEY"} & set(settings)
    bot = kinds["Deployment/generic-framework"]["spec"]["template"]["spec"]["containers"][0]
    assert bot["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert bot["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert kinds["Job/generic-framework-db-upgrade"]["spec"]["template"]["spec"]["containers"][0][
        "command"
    ] == ["generic-framework", "db", "upgrade"]
    telegram = kinds["Deployment/generic-framework-telegram"]["spec"]
    assert telegram["replicas"] == 1 and telegram["strategy"]["type"] == "Recreate"
