# awslocal's moto launcher: runs moto_server in this process after teaching
# moto's EC2 backend the images awslocal publishes (EKS-optimized,
# Bottlerocket, Windows EKS). moto's RegisterImage drops architecture,
# platform, owner and creation date, so images are added to moto's model
# directly: at every region backend's creation (argv[1], a JSON list in
# moto's own amis.json shape) and, for releases published later, through a
# small HTTP sidecar on 127.0.0.1:argv[2].
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from moto.ec2.models import amis as _amis
from moto.ec2.models import ec2_backends
from moto.core.parse import default_timestamp_parser as _parse_ts

_lock = threading.Lock()
with open(sys.argv[1], encoding="utf-8") as f:
    _extra = json.load(f)
_orig_load = _amis.AmiBackend._load_amis


def _add(backend, spec):
    spec = dict(spec)
    spec["owner_alias"] = "amazon"
    if spec.get("creation_date"):
        spec["creation_date"] = _parse_ts(spec["creation_date"])
    else:
        spec.pop("creation_date", None)
    backend.amis[spec["ami_id"]] = _amis.Ami(backend, **spec)


def _load(self):
    _orig_load(self)
    with _lock:
        for spec in _extra:
            _add(self, spec)


_amis.AmiBackend._load_amis = _load


class _Sidecar(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def do_POST(self):
        try:
            spec = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with _lock:
                _extra.append(spec)
                # Only backends that exist already; later ones load _extra.
                for account in dict.values(ec2_backends):
                    for backend in dict.values(account):
                        _add(backend, spec)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")
        except Exception as e:  # report to the Go side instead of dying
            self.send_response(500)
            self.end_headers()
            self.wfile.write(str(e).encode())


_srv = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), _Sidecar)
threading.Thread(target=_srv.serve_forever, daemon=True).start()

from moto.server import main

main(["-H", "127.0.0.1", "-p", sys.argv[3]])
