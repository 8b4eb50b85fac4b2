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

# EC2 counts only user tags against a resource's 50, but moto's CreateTags
# also counts the aws: tags a resource already has: an instance launched
# from a launch template carries two (aws:ec2launchtemplate:id and
# :version), so moto refuses its 49th and 50th user tags. Count as EC2
# does; awslocal's front enforces the limit itself before moto sees a call.
from moto.ec2 import exceptions as _ec2errors
from moto.ec2.models import tags as _tags


def _create_tags(self, resource_ids, tags):
    if None in tags.values():
        raise _ec2errors.InvalidParameterValueErrorTagNull()
    add = {k for k in tags if not k.startswith("aws:")}
    for rid in resource_ids:
        have = {k for k in self.tags.get(rid, {}) if not k.startswith("aws:")}
        if len(have | add) > 50:
            raise _ec2errors.TagLimitExceeded()
    for rid in resource_ids:
        self.tags[rid].update(tags)
    return True


_tags.TagBackend.create_tags = _create_tags


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
