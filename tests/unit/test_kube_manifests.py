"""Kubernetes objects netslo creates: names, labels, placement, responders, annotations, Services."""

import pytest

from netslo.core.errors import SpecError
from netslo.providers.kube import manifests as km


def test_run_scoped_namespace_is_labelled_with_the_run_id():
    ns = km.namespace_manifest("6b03abcd12ef")
    assert ns["metadata"]["name"] == "netslo-6b03abcd12ef"
    assert ns["metadata"]["labels"] == {km.RUN_LABEL: "6b03abcd12ef", "app.kubernetes.io/managed-by": "netslo"}


def test_new_run_ids_are_unique_valid_namespace_names():
    ids = {km.new_run_id() for _ in range(50)}
    assert len(ids) == 50
    for i in ids:
        assert km._DNS_LABEL.match(km.namespace_name(i))


def test_bad_run_id_is_a_one_line_spec_error():
    with pytest.raises(SpecError, match="run id: value 'Bad_ID'"):
        km.namespace_name("Bad_ID")


@pytest.mark.parametrize("name,expected", [("server", "server"), ("Client Same", "client-same"),
                                           ("x" * 80, "x" * 63), ("--a__b--", "a-b")])
def test_pod_names_become_dns_labels(name, expected):
    assert km.k8s_name(name) == expected


def test_agent_pod_is_pinned_to_its_node_with_required_affinity():
    pod = km.agent_pod_manifest("server", "r1", "worker-2")
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker-2"]}]}]
    assert pod["metadata"]["namespace"] == "netslo-r1"
    assert pod["metadata"]["labels"][km.RUN_LABEL] == "r1"
    assert pod["metadata"]["labels"][km.POD_LABEL] == "server"


def test_agent_pod_is_one_container_that_serves_the_responders_and_is_the_exec_target():
    pod = km.agent_pod_manifest("server", "r1", "n1", image="img:1", pull_policy="Never")
    cs = {c["name"]: c for c in pod["spec"]["containers"]}
    assert list(cs) == ["agent"]
    agent = cs["agent"]
    assert agent["command"] == ["python", "-m", "netslo.agent", "responders", "udp,tcp,http",
                                "--ready-dir", "/run/netslo", "--ready-port", "7099"]
    assert agent["ports"] == [{"name": "udp", "containerPort": 7000, "protocol": "UDP"},
                              {"name": "tcp", "containerPort": 7001, "protocol": "TCP"},
                              {"name": "http", "containerPort": 7080, "protocol": "TCP"}]
    assert agent["image"] == "img:1" and agent["imagePullPolicy"] == "Never"
    # a startup probe only: nothing probes the responders once they serve (no noise during measurements)
    assert "readinessProbe" not in agent and "livenessProbe" not in agent
    # the kubelet's own TCP connect to the set's ready port, not an exec in the container
    assert agent["startupProbe"] == {"tcpSocket": {"port": 7099}, "periodSeconds": 1, "failureThreshold": 600}
    assert agent["resources"]["requests"] == {"cpu": "10m", "memory": "208Mi"}
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False and spec["terminationGracePeriodSeconds"] == 1
    assert "hostNetwork" not in spec
    for c in cs.values():  # requests only: a CPU limit would throttle (CFS) and add latency
        assert "limits" not in c["resources"]
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert c["securityContext"]["runAsUser"] == 65534 and c["securityContext"]["runAsNonRoot"]
    # no capability, yet ICMP: the agent's group may open ping sockets in the pod's namespace
    assert pod["spec"]["securityContext"] == {"sysctls": [{"name": "net.ipv4.ping_group_range", "value": "65534 65534"}]}


def test_host_network_baseline_pod():
    pod = km.agent_pod_manifest("base", "r1", "n1", host_network=True, responders=())
    assert pod["spec"]["hostNetwork"] is True
    assert pod["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "securityContext" not in pod["spec"]          # a namespaced sysctl would be the node's
    [agent] = pod["spec"]["containers"]
    assert agent["name"] == "agent" and agent["command"] == km.IDLE_COMMAND and "startupProbe" not in agent


def test_bandwidth_annotations_are_carried_and_checked():
    pod = km.agent_pod_manifest("c", "r1", "n1", annotations={
        "kubernetes.io/egress-bandwidth": "10M", "kubernetes.io/ingress-bandwidth": "1G", "x/y": 3})
    assert pod["metadata"]["annotations"] == {"kubernetes.io/egress-bandwidth": "10M",
                                              "kubernetes.io/ingress-bandwidth": "1G", "x/y": "3"}
    with pytest.raises(SpecError, match=r"annotation kubernetes.io/egress-bandwidth: value '10 mbit'"):
        km.agent_pod_manifest("c", "r1", "n1", annotations={"kubernetes.io/egress-bandwidth": "10 mbit"})


@pytest.mark.parametrize("kw,field", [({"pull_policy": "Sometimes"}, "imagePullPolicy"),
                                      ({"responders": ("udp", "quic")}, "responders"),
                                      ({"responders": ("tcp", "ws")}, "responders")])
def test_bad_pod_options_name_the_field(kw, field):
    with pytest.raises(SpecError, match=f"^{field}: value"):
        km.agent_pod_manifest("c", "r1", "n1", **kw)


def test_clusterip_service_selects_the_pod_of_this_run_only():
    svc = km.service_manifest("srv", "r1", "server")
    assert svc["spec"]["selector"] == {km.POD_LABEL: "server", km.RUN_LABEL: "r1"}
    assert svc["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == [
        ("udp", 7000, "UDP"), ("tcp", 7001, "TCP"), ("http", 7080, "TCP")]
    assert "externalTrafficPolicy" not in svc["spec"]


def test_nodeport_service_with_traffic_policy():
    svc = km.service_manifest("srv", "r1", "server", type="NodePort", external_traffic_policy="Local")
    assert svc["spec"]["type"] == "NodePort" and svc["spec"]["externalTrafficPolicy"] == "Local"


@pytest.mark.parametrize("kw,msg", [
    ({"type": "LoadBalancer"}, "service type: value 'LoadBalancer'"),
    ({"external_traffic_policy": "Local"}, "externalTrafficPolicy: value 'Local' — expected only with type NodePort"),
    ({"type": "NodePort", "external_traffic_policy": "local"}, "externalTrafficPolicy: value 'local'"),
])
def test_bad_service_options(kw, msg):
    with pytest.raises(SpecError, match=msg):
        km.service_manifest("srv", "r1", "server", **kw)


def test_a_drains_backend_prefers_its_node_and_the_service_selects_whichever_pod_runs():
    dep = km.backend_deployment_manifest("drain-backend", "6b03abcd12ef", "node-a")
    spec = dep["spec"]
    assert dep["kind"] == "Deployment" and spec["replicas"] == 1
    affinity = spec["template"]["spec"]["affinity"]["nodeAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity      # drained, it may move
    pref = affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchExpressions"][0]
    assert pref == {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}
    labels = spec["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in spec["selector"]["matchLabels"].items())
    svc = km.service_manifest("drain", "6b03abcd12ef", "drain-backend", protocols=("udp", "tcp"))
    assert all(labels[k] == v for k, v in svc["spec"]["selector"].items())
    assert spec["template"]["spec"]["containers"][0]["command"][:4] == ["python", "-m", "netslo.agent", "responders"]


def test_a_pod_can_ask_for_more_cpu_and_a_bad_quantity_is_one_line():
    pod = km.agent_pod_manifest("server", "r1", "n1", cpu="100m")
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"
    assert km.agent_pod_manifest("s", "r1", "n1", cpu="0.5")["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "0.5"
    with pytest.raises(SpecError, match=r"cpu: value '100 m' — expected a CPU quantity such as 100m or 0.5") as e:
        km.agent_pod_manifest("s", "r1", "n1", cpu="100 m")
    assert "\n" not in str(e.value)
