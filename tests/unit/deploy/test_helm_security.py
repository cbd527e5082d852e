"""Security properties of the rendered chart: no secret values, non-root pods, pinned images,
real commands and settings, least-privilege RBAC and network fences (fixtures in conftest.py)."""

from __future__ import annotations

import re

import yaml

from tests.support.helm_chart import (
    LEARNER_POLICIES,
    REFERENCES,
    SECRET_NAMES,
    containers,
    one,
    release_prefix,
    settings_map,
)

CREDENTIAL_URL = re.compile(r"://[^/@\s]*:[^/@\s]*@")
PLAIN_URL_SETTINGS = {"NEVIS_DATA_MIRROR"}  # where the benchmark's sources are mirrored


def test_no_secret_value_is_written_anywhere(objects):
    assert not [o for o in objects if o["kind"] == "Secret"]
    config = settings_map(objects)["data"]
    assert not [k for k in config if SECRET_NAMES.search(k) and not k.endswith(REFERENCES)]
    assert not [v for v in config.values() if CREDENTIAL_URL.search(v)]
    for where, _, container in containers(objects):
        for env in container.get("env", []):
            assert not SECRET_NAMES.search(env["name"]) or "valueFrom" in env, (where, env)
            value = str(env.get("value", ""))
            # A URL in plain env is only a mirror's address: never a database, never a credential.
            assert "://" not in value or env["name"] in PLAIN_URL_SETTINGS, (where, env)
            assert not CREDENTIAL_URL.search(value) and "@" not in value, (where, env)
    text = yaml.safe_dump_all(objects)
    assert "postgresql" not in text and "AKIA" not in text


def test_the_secret_is_referenced_by_name_and_mounted_in_harness_heads_only(prod_objects):
    for where, pod, container in containers(prod_objects):
        refs = [e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e]
        allowed = (
            ["nevis-prod-env", "nevis-kaggle"]
            if "-benchmark-data/" in where and where.endswith(("/fetch", "/convert"))
            else ["nevis-prod-env"]
        )
        assert refs in ([], allowed), where
        secrets = [v for v in pod.get("volumes", []) if "secret" in v]
        if secrets:
            assert where.endswith("/head/ray-head"), where
            assert secrets[0]["secret"]["secretName"] == "nevis-prod-env"
            assert container["volumeMounts"][0]["mountPath"] == "/var/run/secrets/nevis"
    cluster = one(prod_objects, "RayCluster")
    assert cluster["spec"]["headGroupSpec"]["template"]["metadata"]["labels"]["nevis.io/role"] == "harness"
    for group in cluster["spec"]["workerGroupSpecs"]:
        pod = group["template"]
        assert pod["metadata"]["labels"]["nevis.io/role"] == "learner"
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert {"name": "NEVIS_SANDBOX", "value": "bwrap"} in pod["spec"]["containers"][0]["env"]


def test_every_container_is_non_root_without_privilege_escalation(objects):
    seen = 0
    for where, pod, container in containers(objects):
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False, where
        assert security["capabilities"]["drop"] == ["ALL"], where
        if where.endswith("-seccomp-installer/DaemonSet/install"):
            continue  # root to write the kubelet's seccomp folder: see the installer's own test
        assert security.get("runAsNonRoot", pod["securityContext"]["runAsNonRoot"]) is True, where
        assert pod["securityContext"]["runAsUser"] != 0, where
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", where
        assert container.get("resources", {}).get("limits"), where
        seen += 1
    assert seen >= 7
    autoscaler = one(objects, "RayCluster")["spec"]["autoscalerOptions"]["securityContext"]
    assert autoscaler["allowPrivilegeEscalation"] is False and autoscaler["runAsNonRoot"] is True


def test_the_service_s_own_processes_run_on_a_read_only_root(objects):
    for where, _, container in containers(objects):
        if "/head/" in where or "/cpu/" in where or "/gpu/" in where:
            continue  # Ray pods: see rayCluster.readOnlyRootFilesystem
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, where


def test_every_image_is_pinned(objects):
    images = [c["image"] for _, _, c in containers(objects)]
    config = settings_map(objects)["data"]
    images += [config["NEVIS_KUBERAY_WORKER_IMAGE"], config["NEVIS_KUBERAY_HARNESS_IMAGE"]]
    for image in images:
        if "@sha256:" in image:
            assert re.fullmatch(r"\S+@sha256:[0-9a-f]{64}", image), image
            continue
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        assert tag and tag not in ("latest", "nightly", "main", "master"), image


def test_the_coordinator_migrates_first_and_probes_its_health(objects):
    deployment = one(objects, "Deployment", "nevis-coordinator")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["command"] == ["nevis", "db", "upgrade"]
    app = pod["containers"][0]
    assert app["command"][:2] == ["nevis", "serve"] and "--no-migrate" in app["command"]
    assert app["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert app["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    for kind in ("PodDisruptionBudget", "Service"):
        obj = one(objects, kind)
        assert (obj["spec"].get("selector", {}).get("matchLabels") or obj["spec"]["selector"]) == selector
    hpa = one(objects, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert "replicas" not in deployment["spec"]  # the autoscaler owns it


def test_every_command_is_a_real_nevis_command(objects):
    """The commands the chart runs parse with the `nevis` CLI (no placeholder)."""
    import click
    import typer.main

    from services.cli.main import app

    root = typer.main.get_command(app)
    commands = [c["command"] for _, _, c in containers(objects) if "command" in c]
    assert len(commands) >= 4
    for argv in commands:
        assert argv[0] == "nevis", argv
        command, rest = root, list(argv[1:])
        while isinstance(command, click.Group) and rest and rest[0] in command.commands:
            command = command.commands[rest.pop(0)]
        assert not isinstance(command, click.Group), argv
        command.make_context(argv[0], rest)  # raises on an unknown option or bad value
    crons = {
        o["metadata"]["name"].removeprefix(release_prefix(objects) + "-"): o["spec"]["jobTemplate"]["spec"]["template"][
            "spec"
        ]["containers"][0]["command"][1:]
        for o in objects
        if o["kind"] == "CronJob"
    }
    assert crons == {
        "probe-catchup": ["probe-workers", "--workers", "1", "--once", "--watch"],
        "refresh": ["refresh", "run"],
    }


def test_the_config_map_holds_real_settings_only(objects):
    from services.coordinator.common.config import CoordinatorSettings

    fields = set(CoordinatorSettings.model_fields)
    config = settings_map(objects)["data"]
    assert [k for k in config if k.removeprefix("NEVIS_").lower() not in fields] == []
    settings = CoordinatorSettings(
        **{k.removeprefix("NEVIS_").lower(): v for k, v in config.items() if k != "NEVIS_ENVIRONMENT"},
        database_url="postgresql+psycopg://db/nevis",
    )
    assert settings.kuberay_secret_name and settings.backend in ("kuberay", "ray")


def test_the_rbac_allows_rayjobs_and_network_policies_only(objects):
    role = one(objects, "Role")
    assert role["rules"] == [
        {
            "apiGroups": ["ray.io"],
            "resources": ["rayjobs"],
            "verbs": ["create", "get", "list", "watch", "delete", "patch"],
        },
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["create", "get", "patch"]},
    ]
    binding = one(objects, "RoleBinding")
    assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]
    account = one(objects, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": account["metadata"]["namespace"]}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_the_learner_fences_are_exactly_the_backend_s(objects):
    expected = [d for d in yaml.safe_load_all(LEARNER_POLICIES.read_text()) if d]
    namespace = settings_map(objects)["data"]["NEVIS_KUBERAY_NAMESPACE"]
    for policy in expected:
        policy["metadata"]["namespace"] = namespace
        assert one(objects, "NetworkPolicy", policy["metadata"]["name"]) == policy


def test_learner_pods_reach_only_ray_pods_and_dns(objects):
    fence = one(objects, "NetworkPolicy", "nevis-learner-fence")["spec"]
    assert fence["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "nevis-worker", "nevis.io/role": "learner"}
    assert set(fence["policyTypes"]) == {"Ingress", "Egress"}
    ray_pods = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "nevis-worker"}}}
    (to_ray, to_dns) = fence["egress"]
    assert to_ray == {"to": [ray_pods]}
    assert to_dns["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ]
    assert {p["port"] for p in to_dns["ports"]} == {53}
    # No other policy opens egress for learner pods (policies are additive).
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        if policy["metadata"]["name"] != "nevis-learner-fence":
            assert "Egress" not in policy["spec"]["policyTypes"], policy["metadata"]["name"]
    # The standing cluster's workers are learner pods the fence selects.
    for group in one(objects, "RayCluster")["spec"]["workerGroupSpecs"]:
        labels = group["template"]["metadata"]["labels"]
        assert fence["podSelector"]["matchLabels"].items() <= labels.items()


def test_the_coordinator_takes_only_api_traffic(default_objects, prod_objects):
    policy = one(default_objects, "NetworkPolicy", "nevis-coordinator")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"ports": [{"port": 8000, "protocol": "TCP"}]}]
    prod = one(prod_objects, "NetworkPolicy", "nevis-coordinator")["spec"]
    assert len(prod["ingress"][0]["from"]) == 2
    probes = one(default_objects, "NetworkPolicy", "nevis-probe-workers")["spec"]
    assert probes["policyTypes"] == ["Ingress"] and "ingress" not in probes


def test_the_gpu_group_requests_gpus_on_gpu_nodes(default_objects, prod_objects):
    for objects, gpus, replicas in ((default_objects, 1, 0), (prod_objects, 2, 0)):
        groups = {g["groupName"]: g for g in one(objects, "RayCluster")["spec"]["workerGroupSpecs"]}
        assert set(groups) == {"cpu", "gpu"}
        gpu = groups["gpu"]
        assert gpu["replicas"] == replicas and gpu["minReplicas"] == 0
        pod = gpu["template"]["spec"]
        resources = pod["containers"][0]["resources"]
        assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == gpus
        assert pod["nodeSelector"] and pod["tolerations"][0]["key"] == "nvidia.com/gpu"
        cpu = groups["cpu"]["template"]["spec"]["containers"][0]["resources"]
        assert "nvidia.com/gpu" not in cpu["limits"]


def test_the_ray_backend_points_at_the_standing_cluster(default_objects, prod_objects):
    assert "NEVIS_RAY_ADDRESS" not in settings_map(default_objects)["data"]
    config = settings_map(prod_objects)["data"]
    cluster = one(prod_objects, "RayCluster")["metadata"]
    assert config["NEVIS_RAY_ADDRESS"] == f"http://{cluster['name']}-head-svc.{cluster['namespace']}.svc:8265"
    dashboard = one(prod_objects, "NetworkPolicy", f"{cluster['name']}-dashboard")
    assert dashboard["spec"]["ingress"][0]["ports"] == [{"port": 8265, "protocol": "TCP"}]


def test_the_ingress_is_tls_and_targets_the_service(prod_objects):
    ingress = one(prod_objects, "Ingress")["spec"]
    assert ingress["tls"] == [{"hosts": ["nevis.lab.example"], "secretName": "nevis-tls"}]
    backend = ingress["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == one(prod_objects, "Service")["metadata"]["name"]
