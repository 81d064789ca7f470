"""A stand-in Kubernetes API server on 127.0.0.1 for the scheduler role's kubernetes backend.

No API server can run here, so this serves the few endpoints that kubernetes.core (k8s, k8s_info,
k8s_taint) use for Node objects, built from the real API's documented objects and semantics
(https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/node-v1/ and
https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/):

- discovery: GET /version, /api (APIVersions), /apis (APIGroupList), /api/v1 (APIResourceList
  with `nodes`);
- GET /api/v1/nodes (NodeList), GET /api/v1/nodes/NAME (Node, or a 404 Status);
- PATCH /api/v1/nodes/NAME with `application/merge-patch+json` (RFC 7386: maps merge, null
  deletes a key, lists are replaced) or `application/strategic-merge-patch+json` - for the Node
  fields used here (metadata.labels, metadata.annotations, spec.taints) strategic merge is the
  same as a merge patch: labels/annotations are maps and NodeSpec.taints has no patchMergeKey,
  so the list is replaced (`$patch` directives are not implemented);
  `application/json-patch+json` is answered 415 (not implemented here).
- ``?dryRun=All`` (server-side dry run, what kubernetes.core sends in check mode) answers with the
  patched object and stores nothing;
- a write that changes the object bumps metadata.resourceVersion; requests are logged to ``requests``.

Run ``serve(nodes)`` -> (server, url); ``server.nodes`` holds the objects, ``server.requests`` the log.
"""
import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NODES_RESOURCE = {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node",
                  "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                  "shortNames": ["no"]}


def node(name, labels=None, taints=None, unschedulable=None):
    """A Node object as the API returns it (trimmed to what the role reads)."""
    obj = {"kind": "Node", "apiVersion": "v1",
           "metadata": {"name": name, "uid": "uid-" + name, "resourceVersion": "1",
                        "labels": dict({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}, **(labels or {})),
                        "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
           "spec": {},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    if taints:
        obj["spec"]["taints"] = taints
    if unschedulable is not None:
        obj["spec"]["unschedulable"] = unschedulable
    return obj


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, code, doc):
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        path = self.path.split("?")[0].rstrip("/")
        srv.requests.append(("GET", path, None, None))
        if path == "/version":
            return self._send(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0", "platform": "linux/amd64"})
        if path == "/api":
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
        if path == "/apis":
            return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if path == "/api/v1":
            return self._send(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [NODES_RESOURCE]})
        with srv.lock:
            if path == "/api/v1/nodes":
                return self._send(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                        "items": [srv.nodes[n] for n in sorted(srv.nodes)]})
            if path.startswith("/api/v1/nodes/"):
                name = path[len("/api/v1/nodes/"):]
                if name in srv.nodes:
                    return self._send(200, srv.nodes[name])
                return self._send(404, _status(404, "NotFound", 'nodes "%s" not found' % name))
        return self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))

    def do_PATCH(self):
        srv = self.server
        path = self.path.split("?")[0].rstrip("/")
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        srv.requests.append(("PATCH", path, kind, body))
        if not path.startswith("/api/v1/nodes/"):
            return self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
        if kind not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            return self._send(415, _status(415, "UnsupportedMediaType", "the stand-in does not implement %s" % kind))
        name = path[len("/api/v1/nodes/"):]
        with srv.lock:
            if name not in srv.nodes:
                return self._send(404, _status(404, "NotFound", 'nodes "%s" not found' % name))
            new = merge_patch(srv.nodes[name], body)
            if "dryRun=All" in self.path:
                return self._send(200, new)          # server-side dry run: answered, not stored
            if new != srv.nodes[name]:
                new["metadata"]["resourceVersion"] = str(int(srv.nodes[name]["metadata"]["resourceVersion"]) + 1)
            srv.nodes[name] = new
            return self._send(200, new)


def serve(nodes):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.nodes = dict((n["metadata"]["name"], n) for n in nodes)
    server.requests = []
    server.lock = threading.Lock()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, "http://127.0.0.1:%d" % server.server_address[1]
