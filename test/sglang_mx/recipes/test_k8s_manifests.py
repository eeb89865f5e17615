"""deploy/k8s/mi355x-1p1d/: the committed manifests are the rendering of the recipe data
(sglang_mx.recipes.k8s), their containers start exactly the recipe's flags, and every object
passes the Kubernetes OpenAPI schemas that kubernetes-validate 1.37.0 bundles, strict (unknown
fields refused), for each Kubernetes version it ships (1.25 to 1.37). Service and Deployment are
validated whole. LeaderWorkerSet is a CRD whose schema no PyPI, npm or Debian package ships
(kubernetes-validate reports it missing, asserted below): its own fields are checked against
kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go, its metadata and pod
templates against core ObjectMeta and PodTemplateSpec. Offline: the schemas are in the wheel."""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path

import kubernetes_validate as kv
import pytest
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from sglang_mx.recipes import k8s, pd

ROOT = Path(__file__).parents[3]
NAME = "mi355x-1p1d"
DIR = ROOT / "deploy" / "k8s" / NAME
VERSIONS = sorted(set(kv.utils.all_versions()), key=lambda v: tuple(map(int, v.split("."))))

# LeaderWorkerSet v1, from leaderworkerset_types.go (kubernetes-sigs/lws, read 2026-12-02).
LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_SPEC = {"replicas", "leaderWorkerTemplate", "rolloutStrategy", "startupPolicy",
            "networkConfig"}  # fmt: skip
LWS_TEMPLATE = {"leaderTemplate", "workerTemplate", "size", "restartPolicy", "subGroupPolicy",
                "volumeClaimTemplates", "persistentVolumeClaimRetentionPolicy"}  # fmt: skip
LWS_RESTART = {"Default", "RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"}
LWS_STARTUP = {"LeaderCreated", "LeaderReady"}


def committed() -> dict[str, list[dict]]:
    return {f.name: list(yaml.safe_load_all(f.read_text())) for f in sorted(DIR.glob("*.yaml"))}


def definition_errors(obj: object, definition: str, version: str) -> list[str]:
    """`obj` against one definition of Kubernetes `version`'s strict schemas."""
    folder = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    defs = json.loads((folder / f"v{version}-local-strict" / "_definitions.json").read_text())
    registry = Resource.from_contents(defs) @ Registry()
    schema = {"$ref": f"{defs['$id']}#/$defs/{definition}"}
    validator = Draft202012Validator(schema, registry=registry)
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(obj)]


def unknown_fields(obj: dict, where: str, known: set[str]) -> list[str]:
    """One problem per field of `obj` (at `where`) that its Go type does not have."""
    return [f"{where}: unknown field {f}" for f in sorted(set(obj) - known)]


def count_problems(obj: dict, where: str, name: str, least: int, note: str = "") -> list[str]:
    """The problem with `obj[name]` unless it is a whole number >= `least` (absent: 1, the Go
    default of both LWS counts)."""
    n = obj.get(name, 1)
    if not isinstance(n, int) or isinstance(n, bool) or n < least:
        return [f"{where}.{name} {n!r}{note}"]
    return []


def policy_problems(obj: dict, where: str, name: str, default: str, allowed: set[str]) -> list[str]:
    """The problem with `obj[name]` unless it is one of `allowed` (absent: the Go `default`)."""
    if obj.get(name, default) not in allowed:
        return [f"{where}.{name} {obj.get(name)!r}"]
    return []


def lws_problems(doc: dict, version: str) -> list[str]:
    """What is wrong with a LeaderWorkerSet, by its Go types and the core schemas it embeds."""
    out = []
    if doc.get("apiVersion") != LWS_API or doc.get("kind") != "LeaderWorkerSet":
        out.append(f"apiVersion/kind {doc.get('apiVersion')}/{doc.get('kind')}")
    extra = set(doc) - {"apiVersion", "kind", "metadata", "spec"}
    out += [f"unknown field {f}" for f in sorted(extra)]
    out += definition_errors(doc.get("metadata"), "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                             version)  # fmt: skip
    spec = doc.get("spec") or {}
    out += unknown_fields(spec, "spec", LWS_SPEC)
    out += count_problems(spec, "spec", "replicas", 0)
    out += policy_problems(spec, "spec", "startupPolicy", "LeaderCreated", LWS_STARTUP)
    tpl = spec.get("leaderWorkerTemplate")
    if not isinstance(tpl, dict):
        return [*out, "spec.leaderWorkerTemplate missing"]
    where = "leaderWorkerTemplate"
    out += unknown_fields(tpl, where, LWS_TEMPLATE)
    out += count_problems(tpl, where, "size", 1, " (at least 1: the leader)")
    out += policy_problems(tpl, where, "restartPolicy", "RecreateGroupOnPodRestart", LWS_RESTART)
    if "workerTemplate" not in tpl:
        out.append("leaderWorkerTemplate.workerTemplate missing (required)")
    for key in ("leaderTemplate", "workerTemplate"):
        if key in tpl:
            errors = definition_errors(tpl[key], "io.k8s.api.core.v1.PodTemplateSpec", version)
            out += [f"{key}.{e}" for e in errors]
    return out


def problems(doc: dict, version: str) -> list[str]:
    if doc.get("kind") == "LeaderWorkerSet":
        return lws_problems(doc, version)
    try:
        kv.validate(doc, version, strict=True)
    except kv.ValidationError as e:
        return [f"{'.'.join(map(str, e.path))}: {e.message}"]
    return []


def test_committed_manifests_are_the_rendering():
    rendered = k8s.render(NAME)
    assert sorted(p.name for p in DIR.glob("*.yaml")) == sorted(rendered)
    for file, text in rendered.items():
        assert (DIR / file).read_text() == text, (
            f"{DIR / file} is not what the recipe renders: run python -m sglang_mx.recipes.k8s"
        )


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_passes_the_kubernetes_schemas(version):
    for file, docs in committed().items():
        for doc in docs:
            found = problems(doc, version)
            assert not found, (file, doc["kind"], version, found)


def test_no_bundled_schema_for_leaderworkerset():
    """If kubernetes-validate ever ships the CRD, validate LWS with it instead of by hand."""
    lws = committed()["prefill.yaml"][0]
    with pytest.raises(kv.SchemaNotFoundError):
        kv.validate(lws, VERSIONS[-1], strict=True)


def _by_kind(docs: list[dict], kind: str) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def test_the_pods_start_the_recipe_flags():
    files, r = committed(), pd.recipe(NAME)
    services = {}
    for role in pd.ROLES:
        lws = _by_kind(files[f"{role}.yaml"], "LeaderWorkerSet")
        service = _by_kind(files[f"{role}.yaml"], "Service")
        services[service["metadata"]["name"]] = {p["port"] for p in service["spec"]["ports"]}
        assert service["spec"]["selector"][k8s.LWS_NAME_LABEL] == lws["metadata"]["name"]
        tpl = lws["spec"]["leaderWorkerTemplate"]
        assert tpl["size"] == 1 and lws["spec"]["replicas"] == 1  # one node per role
        (container,) = tpl["workerTemplate"]["spec"]["containers"]
        head = ["--model-path", k8s.MODEL_PATH, "--host", "0.0.0.0", "--port", "30000"]
        assert container["args"] == [*head, *pd.role_args(NAME, role)], role
        assert container["command"][:2] == ["/bin/sh", "-c"]
        assert f'{pd.IB_DEVICE} "$IB_DEVICE"' in container["command"][2]
        assert container["resources"]["limits"]["amd.com/gpu"] == r.gpus_per_node
    assert r.bootstrap_port in services["glm52-prefill"]
    (router,) = _by_kind(files["router.yaml"], "Deployment")["spec"]["template"]["spec"][
        "containers"
    ]
    urls = {"prefill": "http://glm52-prefill:30000", "decode": "http://glm52-decode:30000"}
    want = pd.router_args(NAME, urls["prefill"], urls["decode"])
    assert router["args"] == ["--host", "0.0.0.0", "--port", "8000", *want]
    for url in urls.values():  # the router reaches each role through its Service
        host, port = url.removeprefix("http://").split(":")
        assert int(port) in services[host]


def _break(doc: dict, path: str, value: object) -> dict:
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return out


POD = "spec.leaderWorkerTemplate.workerTemplate.spec"
BREAKS = [  # (file, kind, path, value, what the check must say)
    ("router.yaml", "Deployment", "spec.template.spec.containers.0.portz", [], "portz"),
    ("router.yaml", "Deployment", "spec.replicas", "one", "is not of type"),
    ("router.yaml", "Service", "spec.ports.0.port", "http", "is not of type"),
    ("prefill.yaml", "Service", "spec.selectr", {}, "selectr"),
    ("prefill.yaml", "LeaderWorkerSet", "spec.leaderWorkerTemplate.size", 0, "size 0"),
    ("prefill.yaml", "LeaderWorkerSet", "spec.leaderWorkerTemplate.workerTemplate", KeyError,
     "workerTemplate missing"),
    ("prefill.yaml", "LeaderWorkerSet", "spec.replica", 1, "unknown field replica"),
    ("decode.yaml", "LeaderWorkerSet", "spec.startupPolicy", "LeaderStarted", "startupPolicy"),
    ("decode.yaml", "LeaderWorkerSet", f"{POD}.containers.0.resources.limits", "8 gpus",
     "is not of type"),
    ("decode.yaml", "LeaderWorkerSet", f"{POD}.containers.0.gpus", 8, "gpus"),
    ("decode.yaml", "LeaderWorkerSet", f"{POD}.containers", KeyError, "containers"),
    ("decode.yaml", "LeaderWorkerSet", "metadata.name", 52, "is not of type"),
]  # fmt: skip


@pytest.mark.parametrize("file,kind,path,value,said", BREAKS)
def test_a_broken_manifest_fails_the_check(file, kind, path, value, said):
    doc = _by_kind(committed()[file], kind)
    assert problems(doc, VERSIONS[-1]) == []
    found = problems(_break(doc, path, value), VERSIONS[-1])
    assert found and said in " ".join(found), found
