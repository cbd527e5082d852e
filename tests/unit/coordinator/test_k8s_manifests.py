"""The plain manifests in k8s/: well-formed, pinned images, no secrets in plain text."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

K8S = Path(__file__).resolve().parents[3] / "k8s"
DOCS = [(path.name, doc) for path in sorted(K8S.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


def _containers(doc):
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return spec.get("containers", []) + spec.get("initContainers", [])


def test_the_manifests_hold_the_coordinator_and_a_rayjob():
    kinds = {doc["kind"] for _, doc in DOCS}
    assert {
        "Deployment",
        "Service",
        "ConfigMap",
        "Role",
        "RoleBinding",
        "ServiceAccount",
        "NetworkPolicy",
        "RayJob",
    } <= kinds


@pytest.mark.parametrize(("name", "doc"), DOCS, ids=[f"{n}:{d['kind']}" for n, d in DOCS])
def test_every_document_is_well_formed(name, doc):
    assert doc["apiVersion"] and doc["metadata"]["name"]
    for container in _containers(doc):
        image = container["image"]
        assert ":" in image.rsplit("/", 1)[-1] and not image.endswith((":latest", ":nightly")), image
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        for env in container.get("env", []):
            assert "value" not in env or "://" not in str(env["value"]), env  # URLs come from Secrets


def test_the_coordinator_runs_migrations_first_and_probes_its_health():
    (deployment,) = [d for _, d in DOCS if d["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["command"] == ["nevis", "db", "upgrade"]
    app = spec["containers"][0]
    assert app["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert app["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert spec["securityContext"]["runAsNonRoot"] is True
    config = next(d for _, d in DOCS if d["kind"] == "ConfigMap")["data"]
    assert not any(k in config for k in ("NEVIS_DATABASE_URL", "AWS_SECRET_ACCESS_KEY"))
