"""The learner sandbox on the nodes: pods that start learner hosts can start bubblewrap under
the chart's seccomp profile, and every other pod keeps the runtime's defaults."""

from __future__ import annotations

from tests.support.helm_chart import CHART, containers, learner_pods, release_prefix, render_raw

PROFILE = CHART / "files" / "seccomp" / "learner-v1.json"


def test_pods_that_start_learner_hosts_can_start_bubblewrap(objects):
    seen = set()
    for where, pod in learner_pods(objects):
        assert pod["hostUsers"] is False, where  # needed by an unmasked /proc
        security = pod["containers"][0]["securityContext"]
        assert security["procMount"] == "Unmasked", where  # bwrap mounts a fresh /proc
        assert security["seccompProfile"] == {"type": "Localhost", "localhostProfile": "nevis/learner-v1.json"}, where
        assert security["allowPrivilegeEscalation"] is False and security["capabilities"]["drop"] == ["ALL"], where
        seen.add(where.split("/")[0].removeprefix(release_prefix(objects) + "-"))
    assert {"ray", "probe-workers", "probe-catchup", "rayjob-template"} <= seen, seen


def test_pods_that_hold_credentials_keep_the_runtime_s_default_profile(objects):
    learner = {where for where, _ in learner_pods(objects)}
    for where, pod, container in containers(objects):
        if "/".join(where.split("/")[:2]) in learner or where.endswith("-seccomp-installer/DaemonSet/install"):
            continue
        assert "seccompProfile" not in container["securityContext"], where
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert container["securityContext"].get("procMount", "Default") == "Default", where


def test_the_installer_writes_the_profile_learner_pods_name_and_nothing_else(objects):
    (installer,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = installer["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"] and "add" not in security["capabilities"]
    assert pod["automountServiceAccountToken"] is False and "hostNetwork" not in pod and "hostPID" not in pod
    host = [v for v in pod["volumes"] if "hostPath" in v]
    assert [v["hostPath"]["path"] for v in host] == ["/var/lib/kubelet/seccomp"]
    argv = container["command"]
    assert argv[argv.index("--to") + 1] == "/host/seccomp/nevis/learner-v1.json"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[host[0]["name"]] == "/host/seccomp"
    (config,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-seccomp")]
    assert config["data"]["learner.json"].strip() == PROFILE.read_text().strip()
    assert installer["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]


def test_the_learner_profile_lets_bubblewrap_in_and_keeps_kernel_surface_out():
    from services.cli.sandbox_cmd import check_seccomp_profile

    profile = check_seccomp_profile(PROFILE.read_text(), source=str(PROFILE))
    denied = {n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ERRNO" for n in rule["names"]}
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    assert not denied & {"unshare", "clone", "clone3", "mount", "umount2", "pivot_root", "chroot"}  # bwrap's
    assert {
        "ptrace",
        "bpf",
        "perf_event_open",
        "kexec_load",
        "init_module",
        "keyctl",
        "setns",
        "open_by_handle_at",
        "userfaultfd",
        "io_uring_setup",
        "process_vm_readv",
    } <= denied


def test_the_seccomp_installer_can_be_left_to_the_operator():
    objects = render_raw(
        {
            "seccompInstaller": {"enabled": False},
            "learnerSandbox": {
                "hostUsers": False,
                "procMount": "Unmasked",
                "seccompProfile": {"type": "Localhost", "localhostProfile": "operator/bwrap.json"},
            },
        }
    )
    assert not [o for o in objects if o["kind"] == "DaemonSet"]
    for where, pod in learner_pods(objects):  # noqa: B007
        assert pod["containers"][0]["securityContext"]["seccompProfile"]["localhostProfile"] == "operator/bwrap.json"
