#!/usr/bin/env python3
"""hub_server.py - a loopback stand-in for the Hugging Face Hub, for tests/hub.

Serves, from a JSON config of repos (repo id -> {"files": {repo path: local file}, options}):
  GET /api/models/OWNER/NAME[/revision/REV]   {"id", "sha", "siblings"}
  GET /api/models/OWNER/NAME/tree/REV[/DIR]   [{"type", "path", "size", "oid", "lfs"}]
  GET /OWNER/NAME/resolve/REV/PATH            the file (Range supported), or for LFS files
                                              with "lfs_redirect" a 302 to a second server
                                              on another host (127.0.0.2, else another port)
Repo options: "token" (401 GatedRepo without "Authorization: Bearer TOKEN"; with
"gate_files_only" the API answers anyway and only downloads need it, as on the hub), "cut_once"
(a path whose first full GET is cut after half the bytes), "corrupt" (a path served with one
byte flipped), "lfs" (suffixes stored in LFS; default .safetensors and .gguf), "page_size"
(tree answers in pages of that many entries, chained by Link: <...?cursor=K>; rel="next").
Every request is appended to the log as one JSON line: server, method, path, range, auth.
When both servers listen, {"hub": URL, "cdn": URL} is written to the ready file.
Python 3 standard library only.
"""
import argparse
import hashlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


def git_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, rid, spec):
        self.id = rid
        self.commit = hashlib.sha1(rid.encode()).hexdigest()
        self.token = spec.get("token")
        self.gate_files_only = spec.get("gate_files_only", False)
        self.page_size = spec.get("page_size", 0)
        self.cut_once = set(spec.get("cut_once", []))
        self.corrupt = set(spec.get("corrupt", []))
        self.redirect = spec.get("lfs_redirect", False)
        lfs = tuple(spec.get("lfs", [".safetensors", ".gguf"]))
        self.files = {}
        for path, local in spec["files"].items():
            with open(local, "rb") as f:
                data = f.read()
            entry = {"type": "file", "path": path, "size": len(data), "oid": git_oid(data)}
            if path.endswith(lfs):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": 134}
            self.files[path] = (entry, data)


class State:
    def __init__(self, config, log_path):
        self.repos = {rid: Repo(rid, spec) for rid, spec in config["repos"].items()}
        self.by_sha = {}
        for r in self.repos.values():
            for entry, data in r.files.values():
                if "lfs" in entry:
                    self.by_sha[entry["lfs"]["oid"]] = (r, entry["path"], data)
        self.log_path = log_path
        self.lock = threading.Lock()
        self.cdn_url = None
        self.cut = set()  # (repo, path) already cut once

    def log(self, **rec):
        with self.lock, open(self.log_path, "a") as f:
            f.write(json.dumps(rec) + "\n")


def make_handler(state, server_name):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            pass

        def send_json(self, code, obj, extra=None):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def error(self, code, err_code, msg):
            self.send_json(code, {"error": msg}, {"X-Error-Code": err_code, "X-Error-Message": msg})

        def send_file(self, repo, path, data, etag):
            if path in repo.corrupt:
                data = bytearray(data)
                data[len(data) // 2] ^= 0x01
                data = bytes(data)
            start = 0
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1])
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", "bytes */%d" % len(data))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            body = data[start:]
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", '"%s"' % etag)
            self.send_header("X-Repo-Commit", repo.commit)
            self.end_headers()
            key = (repo.id, path)
            if path in repo.cut_once and not start and key not in state.cut:
                state.cut.add(key)
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

        def do_GET(self):
            url = urlsplit(self.path)
            path = unquote(url.path)
            state.log(server=server_name, method="GET", path=path,
                      range=self.headers.get("Range"), auth=self.headers.get("Authorization"))
            if server_name == "cdn":
                return self.cdn(path)
            parts = path.strip("/").split("/")
            if parts[:2] == ["api", "models"] and len(parts) >= 4:
                return self.api(parts[2] + "/" + parts[3], parts[4:], url.query)
            if len(parts) >= 5 and parts[2] == "resolve":
                return self.resolve(parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]))
            self.error(404, "EntryNotFound", "no route " + path)

        def repo_or_error(self, rid, download=False):
            repo = state.repos.get(rid)
            if not repo:
                self.error(404, "RepoNotFound", "Repository not found")
                return None
            gated = repo.token and (download or not repo.gate_files_only)
            if gated and self.headers.get("Authorization") != "Bearer " + repo.token:
                self.error(401, "GatedRepo", "Access to model %s is restricted" % rid)
                return None
            return repo

        def check_rev(self, repo, rev):
            if rev not in ("main", repo.commit):
                self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
                return False
            return True

        def api(self, rid, rest, query):
            repo = self.repo_or_error(rid)
            if not repo:
                return
            if not rest or rest[0] == "revision":
                if rest and (len(rest) != 2 or not self.check_rev(repo, rest[1])):
                    return
                return self.send_json(200, {"id": rid, "sha": repo.commit,
                                            "siblings": [{"rfilename": p} for p in repo.files]})
            if rest[0] == "tree" and len(rest) >= 2:
                if not self.check_rev(repo, rest[1]):
                    return
                prefix = "/".join(rest[2:])
                out = []
                for p, (entry, _) in sorted(repo.files.items()):
                    d = p.rsplit("/", 1)[0] if "/" in p else ""
                    if d == prefix:
                        out.append(entry)
                if not repo.page_size:
                    return self.send_json(200, out)
                start = int(query[7:]) if query.startswith("cursor=") else 0
                page, extra = out[start:start + repo.page_size], {}
                if start + repo.page_size < len(out):
                    # the hub sends absolute links; a relative one (later pages here) is valid too
                    origin = "http://%s:%d" % self.server.server_address[:2] if not start else ""
                    extra["Link"] = '<%s%s?cursor=%d>; rel="next"' % (
                        origin, self.path.split("?")[0], start + repo.page_size)
                return self.send_json(200, page, extra)
            self.error(404, "EntryNotFound", "no route")

        def resolve(self, rid, rev, path):
            repo = self.repo_or_error(rid, download=True)
            if not repo or not self.check_rev(repo, rev):
                return
            if path not in repo.files:
                return self.error(404, "EntryNotFound", "%s does not exist" % path)
            entry, data = repo.files[path]
            if "lfs" in entry and repo.redirect:
                self.send_response(302)
                self.send_header("Location", "%s/lfs/%s?sig=x" % (state.cdn_url, entry["lfs"]["oid"]))
                self.send_header("X-Linked-Etag", '"%s"' % entry["lfs"]["oid"])
                self.send_header("X-Linked-Size", str(entry["size"]))
                self.send_header("X-Repo-Commit", repo.commit)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_file(repo, path, data, entry["lfs"]["oid"] if "lfs" in entry else entry["oid"])

        def cdn(self, path):
            parts = path.strip("/").split("/")
            hit = state.by_sha.get(parts[1]) if len(parts) == 2 and parts[0] == "lfs" else None
            if not hit:
                return self.error(404, "EntryNotFound", "no object")
            repo, rpath, data = hit
            self.send_file(repo, rpath, data, parts[1])

    return Handler


class QuietServer(ThreadingHTTPServer):
    """A client that drops a connection (the pull failed elsewhere and stopped its transfers,
    or a cut test) is expected here: no traceback for it."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    a = ap.parse_args()
    with open(a.config) as f:
        state = State(json.load(f), a.log)
    hub = QuietServer(("127.0.0.1", 0), make_handler(state, "hub"))
    try:  # another host than the hub's, as a CDN is
        cdn = QuietServer(("127.0.0.2", 0), make_handler(state, "cdn"))
    except OSError:
        cdn = QuietServer(("127.0.0.1", 0), make_handler(state, "cdn"))
    state.cdn_url = "http://%s:%d" % cdn.server_address[:2]
    for s in (hub, cdn):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"hub": "http://127.0.0.1:%d" % hub.server_address[1], "cdn": state.cdn_url}, f)
    os.rename(tmp, a.ready)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
