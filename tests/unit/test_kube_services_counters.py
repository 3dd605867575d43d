"""kube-proxy (iptables mode) rule counters -> packets per exposure path (text as iptables-save -c prints)."""

from netslo.providers.kube_services import parse_kube_proxy_counters

NS = "netslo-6b03990b57c5"
SAVE = f"""\
[0:0] -A KUBE-EXT-OJ4V -m comment --comment "masquerade traffic for {NS}/srv-nodeport-cluster:http external destinations" -j KUBE-MARK-MASQ
[7:420] -A KUBE-NODEPORTS -p tcp -m comment --comment "{NS}/srv-nodeport-local:http" -m tcp --dport 32111 -j KUBE-EXT-AAAA
[2:120] -A KUBE-NODEPORTS -p tcp -m comment --comment "{NS}/srv-nodeport-cluster:http" -m tcp --dport 32112 -j KUBE-EXT-OJ4V
[5:300] -A KUBE-SERVICES -d 10.96.91.14/32 -p tcp -m comment --comment "{NS}/srv-clusterip:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-SUAY
[9:540] -A KUBE-SERVICES -d 10.96.1.1/32 -p tcp -m comment --comment "other/srv-clusterip:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-OTHER
[3:180] -A KUBE-SVC-SUAY ! -s 10.244.0.0/24 -d 10.96.91.14/32 -p tcp -m comment --comment "{NS}/srv-clusterip:http cluster IP" -j KUBE-MARK-MASQ
[4:240] -A KUBE-EXT-OJ5V -m comment --comment "masquerade traffic for {NS}/srv-nodeport-cluster:http external destinations" -j KUBE-MARK-MASQ
"""
NAMES = {"clusterip": "srv-clusterip", "nodeport-local": "srv-nodeport-local",
         "nodeport-cluster": "srv-nodeport-cluster"}


def test_counts_only_this_runs_rules_in_the_entry_chains():
    assert parse_kube_proxy_counters(SAVE, NS, NAMES) == {
        "clusterip": 5, "nodeport-local": 7, "nodeport-cluster": 2, "masquerade": 4}


def test_no_rules_yet_is_all_zero():
    assert parse_kube_proxy_counters("", NS, NAMES) == {
        "clusterip": 0, "nodeport-local": 0, "nodeport-cluster": 0, "masquerade": 0}
