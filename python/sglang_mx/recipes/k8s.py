"""Kubernetes manifests for a prefill/decode recipe, rendered from the recipe data so the pods
start exactly the flags scripts/launch/mi355x-1p1d.sh does: per role a LeaderWorkerSet
(leaderworkerset.x-k8s.io/v1, one group of one 8-GPU pod: one node per role needs no workers)
and a Service, and the router as a Deployment and a Service. Cluster specifics are the
constants below. `python -m sglang_mx.recipes.k8s` rewrites deploy/k8s/NAME/;
test/sglang_mx/recipes/test_k8s_manifests.py checks the committed files equal this rendering.

Pod settings for RDMA KV transfer (host network and IPC, privileged with IPC_LOCK,
/dev/infiniband and a memory-backed /dev/shm) follow SGLang's own LWS PD example
(docs/references/multi_node_deployment/lws_pd/lws-examples/); `amd.com/gpu` is the resource
AMD's GPU device plugin advertises."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from sglang_mx.recipes import pd

IMAGE = "sglang-mx:0.1.0-sglang0.5.23-rocm-mi35x"  # SGLang's ROCm image + ours (docs/install.md)
MODEL_DIR = "/models"  # on each GPU node, mounted read-only at the same path
MODEL_PATH = f"{MODEL_DIR}/GLM-5.2-MXFP4"
PREFIX = "glm52"
APP = f"{PREFIX}-1p1d"
ENGINE_PORT, ROUTER_PORT = 30000, 8000
GPU = "amd.com/gpu"
# The node's RDMA devices are the one per-node value: appended only when IB_DEVICE is set, as
# the shell recipe does (Mooncake refuses an empty --disaggregation-ib-device).
ENGINE_SHELL = f'exec sglang-mx serve "$@" ${{IB_DEVICE:+{pd.IB_DEVICE} "$IB_DEVICE"}}'
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"  # set by LWS on its pods (api/.../v1)
LWS_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"  # 0: the group's leader
OUT = Path(__file__).resolve().parents[3] / "deploy" / "k8s"


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/component": component}


def _meta(name: str, component: str) -> dict[str, Any]:
    return {"name": name, "labels": _labels(component)}


def _engine_pod(role: str, args: list[str], bootstrap: int | None) -> dict[str, Any]:
    ports = [{"name": "http", "containerPort": ENGINE_PORT, "protocol": "TCP"}]
    if bootstrap is not None:
        ports.append({"name": "bootstrap", "containerPort": bootstrap, "protocol": "TCP"})
    container = {
        "name": "sglang",
        "image": IMAGE,
        "command": ["/bin/sh", "-c", ENGINE_SHELL, "sglang-mx"],
        "args": ["--model-path", MODEL_PATH, "--host", "0.0.0.0", "--port", str(ENGINE_PORT),
                 *args],
        "env": [{"name": "IB_DEVICE", "value": ""}],
        "ports": ports,
        "readinessProbe": {"httpGet": {"path": "/health", "port": ENGINE_PORT},
                           "periodSeconds": 30, "timeoutSeconds": 10},
        "resources": {"limits": {GPU: 8}},
        "securityContext": {"privileged": True, "capabilities": {"add": ["IPC_LOCK"]}},
        "volumeMounts": [
            {"name": "model", "mountPath": MODEL_DIR, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "infiniband", "mountPath": "/dev/infiniband"},
        ],
    }  # fmt: skip
    return {
        "metadata": {"labels": _labels(role)},
        "spec": {
            "hostNetwork": True,
            "hostIPC": True,
            "dnsPolicy": "ClusterFirstWithHostNet",  # Services resolve from the host network
            "containers": [container],
            "volumes": [
                {"name": "model", "hostPath": {"path": MODEL_DIR, "type": "Directory"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                {"name": "infiniband", "hostPath": {"path": "/dev/infiniband"}},
            ],
        },
    }


def _lws(name: str, role: str, pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _meta(name, role),
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": 1,  # the leader only; its template defaults to workerTemplate
                "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": pod,
            },
        },
    }


def _service(name: str, component: str, selector: dict, ports: dict[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, component),
        "spec": {
            "selector": selector,
            "ports": [
                {"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}
                for port_name, port in ports.items()
            ],
        },
    }


def _router(args: list[str]) -> dict[str, Any]:
    labels = _labels("router")
    container = {
        "name": "router",
        "image": IMAGE,
        "command": ["smg", "launch"],
        "args": ["--host", "0.0.0.0", "--port", str(ROUTER_PORT), *args],
        "ports": [{"name": "http", "containerPort": ROUTER_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/readiness", "port": ROUTER_PORT},
                           "periodSeconds": 10},
        "livenessProbe": {"httpGet": {"path": "/liveness", "port": ROUTER_PORT},
                          "periodSeconds": 30},
    }  # fmt: skip
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(f"{PREFIX}-router", "router"),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def manifests(name: str = "mi355x-1p1d", transfer: str | None = None) -> dict[str, list[dict]]:
    """File name -> the objects it holds, for recipe `name` moving KV with `transfer`."""
    r = pd.recipe(name)
    out: dict[str, list[dict]] = {}
    for role in pd.ROLES:
        lws = f"{PREFIX}-{role}"
        bootstrap = r.bootstrap_port if role == "prefill" else None
        pod = _engine_pod(role, pd.role_args(name, role, transfer), bootstrap)
        ports = {"http": ENGINE_PORT, **({"bootstrap": bootstrap} if bootstrap else {})}
        selector = {LWS_NAME_LABEL: lws, LWS_INDEX_LABEL: "0"}
        out[f"{role}.yaml"] = [_lws(lws, role, pod), _service(lws, role, selector, ports)]
    urls = {role: f"http://{PREFIX}-{role}:{ENGINE_PORT}" for role in pd.ROLES}
    router = _router(pd.router_args(name, urls["prefill"], urls["decode"]))
    service = _service(f"{PREFIX}-router", "router", _labels("router"), {"http": ROUTER_PORT})
    out["router.yaml"] = [router, service]
    return out


def _header(name: str, transfer: str) -> str:
    return (
        f"# GLM-5.2 MXFP4 on 1 prefill + 1 decode node of 8x MI355X: recipe {name}, KV over"
        f" {transfer}.\n"
        "# Generated by `python -m sglang_mx.recipes.k8s` from python/sglang_mx/recipes/"
        "mi355x.json;\n"
        "# test/sglang_mx/recipes/test_k8s_manifests.py checks it equals the rendering and its "
        "schema.\n"
        "# Needs the LeaderWorkerSet controller and AMD's GPU device plugin. Per cluster: image,\n"
        "# the model's hostPath, env IB_DEVICE (RDMA devices, comma-separated; empty: the\n"
        "# backend picks). Never applied to a cluster here (docs/scale-out.md).\n"
    )


def render(name: str = "mi355x-1p1d", transfer: str | None = None) -> dict[str, str]:
    """File name -> its YAML text."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # a label set used twice is written out twice, not as &id001 / *id001

    backend = transfer or pd.recipe(name).transfers[0]
    return {
        file: _header(name, backend)
        + yaml.dump_all(docs, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=96)
        for file, docs in manifests(name, transfer).items()
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", default="mi355x-1p1d", choices=pd.names())
    p.add_argument("--transfer", help="KV transfer backend (default: the recipe's own)")
    p.add_argument("--out", type=Path, help="folder to write (default: deploy/k8s/RECIPE)")
    args = p.parse_args(argv)
    out = args.out or OUT / args.recipe
    out.mkdir(parents=True, exist_ok=True)
    for file, text in render(args.recipe, args.transfer).items():
        (out / file).write_text(text)
        print(out / file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
