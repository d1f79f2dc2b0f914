"""What the Kubernetes manifests in deploy/kubernetes say, checked: every object against
the schemas of a current Kubernetes release (kubernetes-validate, strict: an unknown
field fails), and the facts that tie them together, printed as one JSON object for
tests/csi.rs to assert on.

    python3 manifests.py DIR            -> {"objects": [...], "failures": [...], ...}
    python3 manifests.py --validate FILE  -> {"objects": [...], "failures": [...]} for one file
"""

import json
import os
import sys

import kubernetes_validate
import yaml

# The newest release whose schemas the package carries (1.37 with kubernetes-validate
# 1.37.0), printed with the results.
VERSION = kubernetes_validate.latest_version()


def validate(path):
    objects, failures = [], []
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    for d in docs:
        name = f"{d.get('kind')}/{d.get('metadata', {}).get('name')}"
        try:
            kubernetes_validate.validate(d, VERSION, strict=True)
            objects.append(name)
        except Exception as e:  # the validator's errors name the field
            failures.append(f"{os.path.basename(path)}: {name}: {str(e).splitlines()[0]}")
    return docs, objects, failures


def main():
    if sys.argv[1] == "--validate":
        _, objects, failures = validate(sys.argv[2])
        print(json.dumps({"objects": objects, "failures": failures, "version": VERSION}))
        return
    root = sys.argv[1]
    out = {"objects": [], "failures": [], "files": [], "version": VERSION}
    by_kind = {}
    for name in sorted(os.listdir(root)):
        if not name.endswith(".yaml") or name == "kustomization.yaml":
            continue
        out["files"].append(name)
        docs, objects, failures = validate(os.path.join(root, name))
        out["objects"] += objects
        out["failures"] += failures
        for d in docs:
            by_kind.setdefault(d["kind"], []).append(d)
    with open(os.path.join(root, "kustomization.yaml")) as f:
        out["kustomization_resources"] = yaml.safe_load(f)["resources"]
    out["driver"] = by_kind["CSIDriver"][0]["metadata"]["name"]
    ds = by_kind["DaemonSet"][0]["spec"]["template"]["spec"]
    registrar = next(c for c in ds["containers"] if c["name"] == "node-driver-registrar")
    out["registration_path"] = next(a for a in registrar["args"] if a.startswith("--kubelet-registration-path="))
    plugin_dir = next(v for v in ds["volumes"] if v["name"] == "plugin-dir")
    out["plugin_dir"] = plugin_dir["hostPath"]["path"]
    plugin = next(c for c in ds["containers"] if c["name"] == "sealvol")
    out["plugin_args"] = plugin["args"]
    out["plugin_env"] = {e["name"]: e.get("value") or e.get("valueFrom") for e in plugin["env"]}
    out["pods_propagation"] = next(m.get("mountPropagation") for m in plugin["volumeMounts"] if m["mountPath"] == "/var/lib/kubelet/pods")
    sts = by_kind["StatefulSet"][0]
    out["replicas"] = sts["spec"]["replicas"]
    out["service_name"] = sts["spec"]["serviceName"]
    out["headless"] = [s["metadata"]["name"] for s in by_kind["Service"] if s["spec"].get("clusterIP") == "None"]
    cm = next(c for c in by_kind["ConfigMap"] if c["metadata"]["name"] == "sealvol-peers")
    out["peers"] = cm["data"]["peers"].split()
    example = next(d for d in by_kind["Deployment"])
    pod = example["spec"]["template"]["spec"]
    out["example_volumes"] = pod["volumes"]
    out["example_mounts"] = pod["containers"][0]["volumeMounts"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
