"""kubelet's side of CSI, for tests and bench/: a gRPC client generated at start from
the spec's own protobuf (engine/csi/proto/csi.proto) with grpcio-tools, driving a real
`sealvol csi` over its unix socket.

    python3 kubelet.py SOCKET [--grpcio-authority]

reads one call per line on stdin, as JSON, and answers each with one line:

    {"call": "NodePublishVolume", "request": {...}}        -> {"ok": {...}}
                                                           or {"code": "NOT_FOUND", "message": "..."}
    {"parallel": [{"call": ...}, {"call": ...}]}           -> {"results": [answer, answer]}
    {"call": ..., "then_read": "PATH"}                      -> also "read_s": seconds from the
                                                               call to PATH's first byte
Every answer has "call_s": seconds from the call to its answer.

Requests and answers use the protobuf's JSON mapping (field names as in the .proto).
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "engine", "csi", "proto")

SERVICE_OF = {
    "GetPluginInfo": "Identity",
    "GetPluginCapabilities": "Identity",
    "Probe": "Identity",
}


def generate(out):
    """csi_pb2 and csi_pb2_grpc from the spec's protobuf, into `out`."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{well_known}", f"--python_out={out}", f"--grpc_python_out={out}", os.path.join(PROTO_DIR, "csi.proto")])
    if rc != 0:
        sys.exit(f"grpc_tools.protoc failed on {PROTO_DIR}/csi.proto ({rc})")
    sys.path.insert(0, out)


def main():
    socket = sys.argv[1]
    with tempfile.TemporaryDirectory() as gen:
        generate(gen)
        import grpc
        from google.protobuf import json_format
        import csi_pb2
        import csi_pb2_grpc

        # kubelet (since Kubernetes 1.26) sends "localhost" as the authority over a unix
        # socket; grpcio's own default (--grpcio-authority) is the socket's path, which
        # the plugin must take too.
        options = [] if "--grpcio-authority" in sys.argv[2:] else [("grpc.default_authority", "localhost")]
        channel = grpc.insecure_channel(f"unix://{socket}", options=options)
        stubs = {
            "Identity": csi_pb2_grpc.IdentityStub(channel),
            "Node": csi_pb2_grpc.NodeStub(channel),
        }

        def one(c):
            name = c["call"]
            service = SERVICE_OF.get(name, "Node")
            request_type = getattr(csi_pb2, f"{name}Request")
            request = json_format.ParseDict(c.get("request", {}), request_type())
            start = time.monotonic()
            try:
                reply = getattr(stubs[service], name)(request, timeout=c.get("timeout", 120))
            except grpc.RpcError as e:
                return {"code": e.code().name, "message": e.details()}
            answer = {"ok": json_format.MessageToDict(reply, preserving_proto_field_name=True)}
            answer["call_s"] = time.monotonic() - start
            if "then_read" in c:
                with open(c["then_read"], "rb") as f:
                    f.read(1)
                answer["read_s"] = time.monotonic() - start
            return answer

        for line in sys.stdin:
            c = json.loads(line)
            if "parallel" in c:
                results = [None] * len(c["parallel"])
                barrier = threading.Barrier(len(results))

                def run(i, call):
                    barrier.wait()
                    results[i] = one(call)

                threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(c["parallel"])]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                out = {"results": results}
            else:
                out = one(c)
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
