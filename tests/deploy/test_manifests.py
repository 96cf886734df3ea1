"""deploy/kubernetes/: every manifest validates against the Kubernetes schemas, and they agree
with each other, with the Dockerfile and with what tritonserver exports.

The validator is kubernetes-validate (a test dependency): it checks offline against the
OpenAPI schemas of each Kubernetes release it ships, strictly (unknown fields are errors).
"""

import copy
import pathlib
import urllib.request

import kubernetes_validate
import numpy as np
import pytest
import yaml

from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.triton import Triton
from tests.functional.conftest import checked_for_leaks, free_config, port_listening, wait_for

from .test_dockerfile import all_of

MANIFESTS = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
# The oldest Kubernetes release still commonly run, and the newest the validator knows.
VERSIONS = ["1.28.0", kubernetes_validate.latest_version()]


def documents():
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        docs += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def find(kind):
    (doc,) = [doc for _, doc in documents() if doc["kind"] == kind]
    return doc


def test_the_manifests_are_there():
    kinds = sorted(doc["kind"] for _, doc in documents())
    assert kinds == ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service"]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_strictly(version):
    for name, doc in documents():
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError


def test_the_validator_refuses_a_broken_manifest():
    broken = copy.deepcopy(find("Deployment"))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = {"name": "http"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)
    misspelt = copy.deepcopy(find("Deployment"))
    misspelt["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, VERSIONS[-1], strict=True)


def container():
    return find("Deployment")["spec"]["template"]["spec"]["containers"][0]


def env_value(name):
    return next(item["value"] for item in container()["env"] if item["name"] == name)


def test_probes_are_on_tritons_health_endpoints():
    probes = container()
    for probe in ("startupProbe", "readinessProbe"):
        assert probes[probe]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert probes["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    ports = {port["name"]: port["containerPort"] for port in probes["ports"]}
    assert ports == {"http": 8000, "grpc": 8001, "metrics": 8002}


def test_the_grace_period_covers_prestop_drain_in_flight_requests_and_the_stop():
    pod = find("Deployment")["spec"]["template"]["spec"]
    command = container()["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    budget = int(command[1]) + float(env_value("PYTRITON_TRITON_CONFIG_DRAIN_SECS"))
    budget += float(env_value("PYTRITON_TRITON_CONFIG_EXIT_TIMEOUT_SECS")) + 3  # tritonserver's stop after the unload
    assert budget < pod["terminationGracePeriodSeconds"]
    assert find("Deployment")["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_shared_memory_is_a_memory_backed_volume_and_the_user_is_the_images():
    pod = find("Deployment")["spec"]["template"]["spec"]
    mounts = {mount["mountPath"]: mount["name"] for mount in container()["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["sizeLimit"]
    assert "/tmp" in mounts  # the root file system is read-only
    (user,) = all_of("USER")
    assert str(pod["securityContext"]["runAsUser"]) == user.split(":")[0]


def test_prometheus_scrapes_the_metrics_port_and_the_service_exposes_all_three():
    annotations = find("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "8002" and annotations["prometheus.io/path"] == "/metrics"
    service = find("Service")["spec"]
    assert {port["targetPort"] for port in service["ports"]} == {"http", "grpc", "metrics"}
    labels = find("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["selector"].items() <= labels.items()
    assert find("PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()


def adapter_rules():
    return yaml.safe_load(find("ConfigMap")["data"]["config.yaml"])["rules"]


def test_the_autoscaler_uses_the_metrics_the_adapter_serves():
    hpa = find("HorizontalPodAutoscaler")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": find("Deployment")["metadata"]["name"]}
    wanted = {metric["pods"]["metric"]["name"] for metric in hpa["metrics"]}
    assert wanted == {rule["name"]["as"] for rule in adapter_rules()}
    assert hpa["minReplicas"] <= find("Deployment")["spec"]["replicas"] <= hpa["maxReplicas"]


def test_tritonserver_exports_the_series_the_adapter_reads():
    queried = set()
    for rule in adapter_rules():
        queried.add(rule["seriesQuery"].split("{")[0])
        queried.update(word.split("{")[0] for word in rule["metricsQuery"].replace("(", " ").split() if word.startswith("nv_"))
    config = free_config()
    with checked_for_leaks(), Triton(config=config) as triton:
        triton.bind(model_name="Linear", infer_func=lambda requests: [{"y": r["x"]} for r in requests],
                    inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                    outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))], config=ModelConfig(max_batch_size=8))
        triton.run()
        assert wait_for(lambda: port_listening(config.metrics_port), 10), f"nothing listens on {config.metrics_port}"
        with urllib.request.urlopen(f"http://127.0.0.1:{config.metrics_port}/metrics", timeout=10) as response:
            exported = {line.split("{")[0] for line in response.read().decode().splitlines() if line.startswith("nv_")}
    assert queried == {"nv_inference_pending_request_count", "nv_inference_queue_duration_us", "nv_inference_request_success"}
    assert queried <= exported
